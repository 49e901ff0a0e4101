// tess-expand-math rewrites f32 math.erf (exact GELU's) into branch-free arith: an odd
// polynomial below |x| = 0.927734375, 1 - exp(a Q(a) - a) above it (|x| clamped to 4, the
// exp expanded as in tess-expand-math.mlir, the sign or-ed back), one select between the
// two and a NaN select. f64 erf stays a libm call. tests/test_expand_math.py measures it.
// RUN: tessc-opt %s -p 'tess-expand-math{min-iterations=0 min-inner-trip=0}' | filecheck %s
// RUN: tessc-opt %s -p 'tess-expand-math{functions=exp min-iterations=0 min-inner-trip=0}' | filecheck %s --check-prefix=OFF
// RUN: tessc-opt %s -p tess-expand-math | filecheck %s --check-prefix=GATE

func.func @erf(%x: f32, %y: f64) -> (f32, f64) {
  %a = math.erf %x : f32
  %b = math.erf %y : f64
  func.return %a, %b : f32, f64
}
// CHECK-LABEL: func.func @erf(%x: f32, %y: f64) -> (f32, f64) {
// CHECK:         %[[BITS:.*]] = arith.bitcast %x : f32 to i32
// CHECK:         %[[MAG:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK:         %[[SQ:.*]] = arith.mulf %x, %x : f32
// CHECK:         %[[P:.*]] = arith.mulf %{{.*}}, %x : f32
// CHECK-NEXT:    %[[SMALL:.*]] = arith.addf %[[P]], %x : f32
// CHECK-NEXT:    %[[FOUR:.*]] = arith.constant 4.000000e+00 : f32
// CHECK-NEXT:    %[[SAT:.*]] = arith.cmpf ogt, %[[MAG]], %[[FOUR]] : f32
// CHECK-NEXT:    %[[A:.*]] = arith.select %[[SAT]], %[[FOUR]], %[[MAG]] : f32
// CHECK:         arith.constant -0.128717512 : f32
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    %[[Q:.*]] = arith.mulf %{{.*}}, %[[A]] : f32
// CHECK-NEXT:    %[[ARG:.*]] = arith.subf %[[Q]], %[[A]] : f32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK:         arith.fptosi
// CHECK:         %[[EXP:.*]] = arith.select %{{.*}}, %[[ARG]], %{{.*}} : f32
// CHECK:         %[[LARGE:.*]] = arith.subf %[[ONE]], %{{.*}} : f32
// CHECK-NEXT:    %[[LBITS:.*]] = arith.bitcast %[[LARGE]] : f32 to i32
// CHECK-NEXT:    %[[SIGNED:.*]] = arith.ori %[[LBITS]], %{{.*}} : i32
// CHECK:         %[[CUT:.*]] = arith.constant 0.927734375 : f32
// CHECK-NEXT:    %[[IS_LARGE:.*]] = arith.cmpf ogt, %[[MAG]], %[[CUT]] : f32
// CHECK-NEXT:    %[[R:.*]] = arith.select %[[IS_LARGE]], %{{.*}}, %[[SMALL]] : f32
// CHECK-NEXT:    %[[NAN:.*]] = arith.cmpf uno, %x, %x : f32
// CHECK-NEXT:    %[[ERF:.*]] = arith.select %[[NAN]], %x, %[[R]] : f32
// CHECK-NEXT:    %[[ERF64:.*]] = math.erf %y : f64
// CHECK-NEXT:    func.return %[[ERF]], %[[ERF64]] : f32, f64

// OFF-LABEL: func.func @erf(
// OFF-NEXT:    math.erf %x : f32
// OFF-NEXT:    math.erf %y : f64

// By default (erf is among the default functions), under the size gate: a GELU-sized loop
// of 64 x 256 runs expanded, a loop of 511 runs kept.
func.func @gelu_rows(%m: memref<64x256xf32>, %n: memref<511xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c256 = arith.constant 256 : index
  %c511 = arith.constant 511 : index
  scf.for %i = %c0 to %c64 step %c1 {
    scf.for %j = %c0 to %c256 step %c1 {
      %x = memref.load %m[%i, %j] : memref<64x256xf32>
      %y = math.erf %x : f32
      memref.store %y, %m[%i, %j] : memref<64x256xf32>
    }
  }
  scf.for %k = %c0 to %c511 step %c1 {
    %x = memref.load %n[%k] : memref<511xf32>
    %y = math.erf %x : f32
    memref.store %y, %n[%k] : memref<511xf32>
  }
  func.return
}
// GATE-LABEL: func.func @gelu_rows(
// GATE-NOT:     math.erf
// GATE:         arith.cmpf ogt
// GATE:         scf.for %k
// GATE:         math.erf %{{.*}} : f32
// GATE:         func.return
