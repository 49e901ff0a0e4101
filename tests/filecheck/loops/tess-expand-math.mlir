// tess-expand-math rewrites scalar math.exp/tanh (and, when asked, log) into branch-free
// arith: range reduction, a polynomial, 2^k from the exponent bits. The cases pin the
// algorithm's structure; tests/test_expand_math.py measures its error.
// The scalar functions here run once, outside any loop: the checks of the expansions take
// the gate off (min-iterations=0 min-inner-trip=0; the gate is tested at the end).
// RUN: tessc-opt %s -p 'tess-expand-math{min-iterations=0 min-inner-trip=0}' | filecheck %s
// RUN: tessc-opt %s -p 'tess-expand-math{functions=exp,log dtypes=f32 min-iterations=0 min-inner-trip=0}' | filecheck %s --check-prefix=OPTS
// RUN: tessc-opt %s -p tess-expand-math | filecheck %s --check-prefix=GATE
// RUN: tessc-opt %s -p 'tess-expand-math{min-iterations=160 min-inner-trip=10}' | filecheck %s --check-prefix=EDGE

// exp(x) = 2^k * exp(r): clamp (NaN -> the lower clamp, so fptosi never sees it),
// k = fptosi(x*log2(e) +- 0.5), Cody-Waite r = (x - k*ln2_hi) - k*ln2_lo with a no-op
// select on isnan(x) between the steps (a reassociation barrier for LLVM),
// 1 + (r + r^2 q(r)), then 2^k as two factors built by shifting biased exponents.
func.func @exp_f32(%x: f32) -> f32 {
  %y = math.exp %x : f32
  func.return %y : f32
}
// CHECK-LABEL: func.func @exp_f32(%x: f32) -> f32 {
// CHECK-NOT:     math.
// CHECK:         %[[ISNAN:.*]] = arith.cmpf uno, %x, %x : f32
// CHECK-NEXT:    %[[LO:.*]] = arith.constant -1.040000e+02 : f32
// CHECK-NEXT:    %[[BELOW:.*]] = arith.cmpf ult, %x, %[[LO]] : f32
// CHECK-NEXT:    %[[X1:.*]] = arith.select %[[BELOW]], %[[LO]], %x : f32
// CHECK-NEXT:    %[[HI:.*]] = arith.constant 8.900000e+01 : f32
// CHECK-NEXT:    %[[ABOVE:.*]] = arith.cmpf ogt, %[[X1]], %[[HI]] : f32
// CHECK-NEXT:    %[[XC:.*]] = arith.select %[[ABOVE]], %[[HI]], %[[X1]] : f32
// CHECK:         %[[HALF:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-NEXT:    %[[T:.*]] = arith.mulf %[[XC]], %[[LOG2E]] : f32
// CHECK-NEXT:    %[[TR:.*]] = arith.addf %[[T]], %[[HALF]] : f32
// CHECK-NEXT:    %[[K:.*]] = arith.fptosi %[[TR]] : f32 to i32
// CHECK-NEXT:    %[[KF:.*]] = arith.sitofp %[[K]] : i32 to f32
// CHECK-NEXT:    %[[LN2HI:.*]] = arith.constant 0.693145752 : f32
// CHECK-NEXT:    %[[KHI:.*]] = arith.mulf %[[KF]], %[[LN2HI]] : f32
// CHECK-NEXT:    %[[R0:.*]] = arith.subf %[[XC]], %[[KHI]] : f32
// CHECK-NEXT:    %[[R1:.*]] = arith.select %[[ISNAN]], %x, %[[R0]] : f32
// CHECK-NEXT:    %[[LN2LO:.*]] = arith.constant 1.42860677e-06 : f32
// CHECK-NEXT:    %[[KLO:.*]] = arith.mulf %[[KF]], %[[LN2LO]] : f32
// CHECK-NEXT:    %[[R:.*]] = arith.subf %[[R1]], %[[KLO]] : f32
// CHECK:         %[[R2:.*]] = arith.mulf %[[R]], %[[R]] : f32
// CHECK-COUNT-4: arith.mulf %{{.*}}, %[[R]] : f32
// CHECK:         %[[Q:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    %[[R2Q:.*]] = arith.mulf %[[R2]], %[[Q]] : f32
// CHECK-NEXT:    %[[SMALL:.*]] = arith.addf %[[R]], %[[R2Q]] : f32
// CHECK-NEXT:    %[[P:.*]] = arith.addf %{{.*}}, %[[SMALL]] : f32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : i32
// CHECK-NEXT:    %[[K1:.*]] = arith.shrsi %[[K]], %[[ONE]] : i32
// CHECK-NEXT:    %[[K2:.*]] = arith.subi %[[K]], %[[K1]] : i32
// CHECK-NEXT:    %[[BIAS:.*]] = arith.constant 127 : i32
// CHECK-NEXT:    %[[B1:.*]] = arith.addi %[[K1]], %[[BIAS]] : i32
// CHECK-NEXT:    %[[MBITS:.*]] = arith.constant 23 : i32
// CHECK-NEXT:    %[[E1:.*]] = arith.shli %[[B1]], %[[MBITS]] : i32
// CHECK-NEXT:    %[[S1:.*]] = arith.bitcast %[[E1]] : i32 to f32
// CHECK-NEXT:    %[[PS1:.*]] = arith.mulf %[[P]], %[[S1]] : f32
// CHECK-NEXT:    %[[B2:.*]] = arith.addi %[[K2]], %[[BIAS]] : i32
// CHECK-NEXT:    %[[E2:.*]] = arith.shli %[[B2]], %[[MBITS]] : i32
// CHECK-NEXT:    %[[S2:.*]] = arith.bitcast %[[E2]] : i32 to f32
// CHECK-NEXT:    %[[RES:.*]] = arith.mulf %[[PS1]], %[[S2]] : f32
// CHECK-NEXT:    %y = arith.select %[[ISNAN]], %x, %[[RES]] : f32
// CHECK-NEXT:    func.return %y : f32

// f64: i64 bits, bias 1023, 52 mantissa bits, a degree-9 q (10 coefficients).
func.func @exp_f64(%x: f64) -> f64 {
  %y = math.exp %x fastmath<fast> : f64
  func.return %y : f64
}
// CHECK-LABEL: func.func @exp_f64(%x: f64) -> f64 {
// CHECK-NOT:     math.
// CHECK:         arith.constant -7.460000e+02 : f64
// CHECK:         arith.constant 7.100000e+02 : f64
// Only `contract` survives from the fast-math flags (reassoc would undo Cody-Waite).
// CHECK:         %[[K:.*]] = arith.fptosi %{{.*}} : f64 to i64
// CHECK-NEXT:    %[[KF:.*]] = arith.sitofp %[[K]] : i64 to f64
// CHECK-NEXT:    arith.constant 0.69314718036912382 : f64
// CHECK-NEXT:    arith.mulf %[[KF]], %{{.*}} fastmath<contract> : f64
// CHECK-COUNT-9: arith.mulf %{{.*}} fastmath<contract> : f64
// CHECK:         arith.constant 1023 : i64
// CHECK:         arith.constant 52 : i64
// CHECK-NEXT:    arith.shli %{{.*}}, %{{.*}} : i64
// CHECK-NEXT:    arith.bitcast %{{.*}} : i64 to f64
// CHECK:         arith.select %{{.*}}, %x, %{{.*}} : f64
// CHECK-NOT:     math.
// CHECK:         func.return

// tanh: |x| and the sign bit from the bits; the odd polynomial below 0.625, the exp formula
// 1 - 2/(exp(2|x|)+1) above; select, then or the sign bit back in.
func.func @tanh_f32(%x: f32) -> f32 {
  %y = math.tanh %x : f32
  func.return %y : f32
}
// CHECK-LABEL: func.func @tanh_f32(%x: f32) -> f32 {
// CHECK-NOT:     math.
// CHECK:         %[[BITS:.*]] = arith.bitcast %x : f32 to i32
// CHECK-NEXT:    %[[MASK:.*]] = arith.constant 2147483647 : i32
// CHECK-NEXT:    %[[ABITS:.*]] = arith.andi %[[BITS]], %[[MASK]] : i32
// CHECK-NEXT:    %[[SIGN:.*]] = arith.xori %[[BITS]], %[[ABITS]] : i32
// CHECK-NEXT:    %[[A:.*]] = arith.bitcast %[[ABITS]] : i32 to f32
// CHECK-NEXT:    %[[Z:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK:         %[[POLY:.*]] = arith.mulf %[[Z]], %{{.*}} : f32
// CHECK-NEXT:    %[[APOLY:.*]] = arith.mulf %[[A]], %[[POLY]] : f32
// CHECK-NEXT:    %[[SMALL:.*]] = arith.addf %[[APOLY]], %[[A]] : f32
// CHECK-NEXT:    %[[TWOA:.*]] = arith.addf %[[A]], %[[A]] : f32
// CHECK:         arith.fptosi
// CHECK:         arith.shli
// CHECK:         %[[EXP:.*]] = arith.select %{{.*}}, %[[TWOA]], %{{.*}} : f32
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[EP1:.*]] = arith.addf %[[EXP]], %[[ONE:.*]] : f32
// CHECK-NEXT:    %[[Q:.*]] = arith.divf %[[TWO]], %[[EP1]] : f32
// CHECK-NEXT:    %[[LARGE:.*]] = arith.subf %[[ONE]], %[[Q]] : f32
// CHECK-NEXT:    %[[T:.*]] = arith.constant 6.250000e-01 : f32
// CHECK-NEXT:    %[[IS_SMALL:.*]] = arith.cmpf olt, %[[A]], %[[T]] : f32
// CHECK-NEXT:    %[[MAG:.*]] = arith.select %[[IS_SMALL]], %[[SMALL]], %[[LARGE]] : f32
// CHECK-NEXT:    %[[MBITS:.*]] = arith.bitcast %[[MAG]] : f32 to i32
// CHECK-NEXT:    %[[RBITS:.*]] = arith.ori %[[MBITS]], %[[SIGN]] : i32
// CHECK-NEXT:    %y = arith.bitcast %[[RBITS]] : i32 to f32
// CHECK-NEXT:    func.return %y : f32

// log is opt-in: the default leaves it (and vector operands) alone; with dtypes=f32 the
// f64 ops stay.
func.func @log_and_vector(%x: f32, %v: vector<4xf32>) -> (f32, vector<4xf32>) {
  %y = math.log %x : f32
  %w = math.exp %v : vector<4xf32>
  func.return %y, %w : f32, vector<4xf32>
}
// CHECK-LABEL: func.func @log_and_vector(
// CHECK-NEXT:    %y = math.log %x : f32
// CHECK-NEXT:    %w = math.exp %v : vector<4xf32>
// CHECK-NEXT:    func.return %y, %w : f32, vector<4xf32>

// OPTS-LABEL: func.func @exp_f32(
// OPTS-NOT:     math.exp
// OPTS:         arith.shli
// OPTS-LABEL: func.func @exp_f64(
// OPTS-NEXT:    %y = math.exp %x fastmath<fast> : f64
// OPTS-LABEL: func.func @tanh_f32(
// OPTS-NEXT:    %y = math.tanh %x : f32
// OPTS-LABEL: func.func @log_and_vector(
// x = 2^k m, m in [sqrt(1/2), sqrt(2)) straight from the bits (+ 1.0 bits - sqrt(1/2) bits).
// OPTS:         %[[BITS:.*]] = arith.bitcast %{{.*}} : f32 to i32
// OPTS-NEXT:    %[[SHIFT:.*]] = arith.constant 4913933 : i32
// OPTS-NEXT:    %[[ADJ:.*]] = arith.addi %[[BITS]], %[[SHIFT]] : i32
// OPTS-NEXT:    %[[MB:.*]] = arith.constant 23 : i32
// OPTS-NEXT:    %[[EXPO:.*]] = arith.shrsi %[[ADJ]], %[[MB]] : i32
// OPTS:         %[[S:.*]] = arith.divf
// k*ln2_hi is added last, behind the reassociation barrier.
// OPTS:         %[[BARRIER:.*]] = arith.select %[[ISNAN:.*]], %x, %{{.*}} : f32
// OPTS-NEXT:    %[[LN2HI:.*]] = arith.constant 0.693145752 : f32
// OPTS-NEXT:    %[[KHI:.*]] = arith.mulf %{{.*}}, %[[LN2HI]] : f32
// OPTS-NEXT:    %{{.*}} = arith.addf %[[BARRIER]], %[[KHI]] : f32
// OPTS:         %y = arith.select %[[ISNAN]], %x, %{{.*}} : f32
// OPTS-NEXT:    %w = math.exp %v : vector<4xf32>

// The gate (expand_math.py: where it pays), on loops as tess-linalg-to-loops leaves them.
// An op is expanded when it runs at least min-iterations times per call (the product of
// its loops' trip counts; 1024 by default) and its innermost loop at least min-inner-trip
// times (16: a vector; a parallel loop's last dim is the innermost).
// GATE-LABEL: func.func @exp_f32(
// GATE-NEXT:    %y = math.exp %x : f32

// 2 x 512 = 1024 runs, inner 512: expanded (each threshold is inclusive).
func.func @parallel_2x512(%m: memref<2x512xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c512 = arith.constant 512 : index
  "scf.parallel"(%c0, %c0, %c2, %c512, %c1, %c1) <{operandSegmentSizes = array<i32: 2, 2, 2, 0>}> ({
  ^bb0(%i: index, %j: index):
    %x = memref.load %m[%i, %j] : memref<2x512xf32>
    %y = math.exp %x : f32
    memref.store %y, %m[%i, %j] : memref<2x512xf32>
    scf.reduce
  }) : (index, index, index, index, index, index) -> ()
  func.return
}
// GATE-LABEL: func.func @parallel_2x512(
// GATE-NOT:     math.exp
// GATE:         arith.shli
// GATE:         scf.reduce
// EDGE-LABEL: func.func @parallel_2x512(
// EDGE-NOT:     math.exp
// EDGE:         scf.reduce

// 511 runs: stays a libm call.
func.func @loop_511(%m: memref<511xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c511 = arith.constant 511 : index
  scf.for %i = %c0 to %c511 step %c1 {
    %x = memref.load %m[%i] : memref<511xf32>
    %y = math.exp %x : f32
    memref.store %y, %m[%i] : memref<511xf32>
  }
  func.return
}
// GATE-LABEL: func.func @loop_511(
// GATE:         math.exp
// EDGE-LABEL: func.func @loop_511(
// EDGE-NOT:     math.exp
// EDGE:         func.return

// The digits MLP's softmax: 128 rows of 10 classes, 1,280 runs of an inner loop of 10:
// too short to vectorise, so the scalar polynomial would be slower than libm (tanh too).
// min-inner-trip=10 (EDGE) expands it; 16 x 10 = 160 runs is exactly min-iterations=160,
// 15 x 10 is under it.
func.func @rows_of_10(%m: memref<128x10xf32>, %n: memref<16x10xf32>, %p: memref<15x10xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c10 = arith.constant 10 : index
  %c15 = arith.constant 15 : index
  %c16 = arith.constant 16 : index
  %c128 = arith.constant 128 : index
  scf.for %i = %c0 to %c128 step %c1 {
    scf.for %j = %c0 to %c10 step %c1 {
      %x = memref.load %m[%i, %j] : memref<128x10xf32>
      %y = math.tanh %x : f32
      memref.store %y, %m[%i, %j] : memref<128x10xf32>
    }
  }
  scf.for %i = %c0 to %c16 step %c1 {
    scf.for %j = %c0 to %c10 step %c1 {
      %x = memref.load %n[%i, %j] : memref<16x10xf32>
      %y = math.exp %x : f32
      memref.store %y, %n[%i, %j] : memref<16x10xf32>
    }
  }
  scf.for %i = %c0 to %c15 step %c1 {
    scf.for %j = %c0 to %c10 step %c1 {
      %x = memref.load %p[%i, %j] : memref<15x10xf32>
      %y = math.exp %x : f32
      memref.store %y, %p[%i, %j] : memref<15x10xf32>
    }
  }
  func.return
}
// GATE-LABEL: func.func @rows_of_10(
// GATE:         math.tanh
// GATE:         math.exp
// GATE:         math.exp
// EDGE-LABEL: func.func @rows_of_10(
// EDGE-NOT:     math.tanh
// EDGE-NOT:     math.exp
// EDGE:         memref.load %p
// EDGE-NEXT:    math.exp

// A loop of no static trip count counts as large: expanded.
func.func @dynamic(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %m[%i] : memref<?xf32>
    %y = math.exp %x : f32
    memref.store %y, %m[%i] : memref<?xf32>
  }
  func.return
}
// GATE-LABEL: func.func @dynamic(
// GATE-NOT:     math.exp
// GATE:         func.return
