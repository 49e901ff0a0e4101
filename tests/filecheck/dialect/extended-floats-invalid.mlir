// A tess.fill takes an f64 value: an f80 or f128 one is a located error, where printing
// the diagnostic (which prints the op) was a traceback in xDSL's printer.
// RUN: not tessc-opt %s --split-input-file 2>&1 | filecheck %s

func.func @fill_f80() -> tensor<3xf32> {
  // CHECK: extended-floats-invalid.mlir:[[# @LINE + 1]]:3: error: f80 should be of base attribute f64
  %0 = "tess.fill"() <{value = 1.5 : f80}> : () -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// -----

func.func @fill_f128() -> tensor<3xf32> {
  // CHECK: extended-floats-invalid.mlir:[[# @LINE + 1]]:3: error: f128 should be of base attribute f64
  %0 = "tess.fill"() <{value = 1.5 : f128}> : () -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
