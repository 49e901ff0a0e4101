// RUN: tessc-opt %s -t numba --verify-diagnostics
// RUN: not tessc-opt %s -t numba 2>&1 | filecheck %s

// An op codegen cannot translate is a located diagnostic, not a traceback.

func.func private @k(%x: memref<4xi32>) attributes {tess.kernel} {
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%c0] : memref<4xi32>
  // expected-error @+1 {{cannot emit Numba code for 'math.ctpop': no Numba translation}}
  %r = math.ctpop %v : i32
  memref.store %r, %x[%c0] : memref<4xi32>
  func.return
}

// CHECK:      to-numba-errors.mlir:10:3: error: cannot emit Numba code for 'math.ctpop': no Numba translation
// CHECK-NEXT:   %r = math.ctpop %v : i32
// CHECK-NEXT:   ^
// CHECK-NOT:  Traceback
