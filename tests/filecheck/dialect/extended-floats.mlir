// f80 and f128 float attributes, which MLIR accepts: xDSL 0.74 had no byte encoding for
// them, so printing one (even in a diagnostic about it) or parsing its hex form was a
// Python traceback (NotImplementedError). They round-trip (a tess.fill given one:
// extended-floats-invalid.mlir).
// RUN: tessc-opt %s | filecheck %s

// CHECK-LABEL: func.func @constants
func.func @constants() -> (f80, f80, f128, f128) {
  // CHECK-NEXT: arith.constant 2.500000e+00 : f80
  %0 = arith.constant 2.5 : f80
  // CHECK-NEXT: arith.constant 0x7fff8000000000000000 : f80
  %1 = arith.constant 0x7FFF8000000000000000 : f80
  // CHECK-NEXT: arith.constant -1.000000e-01 : f128
  %2 = arith.constant -0.1 : f128
  // CHECK-NEXT: arith.constant 0x7fff8000000000000000000000000000 : f128
  %3 = arith.constant 0x7FFF8000000000000000000000000000 : f128
  func.return %0, %1, %2, %3 : f80, f80, f128, f128
}
