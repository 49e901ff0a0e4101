// tess-expand-math rewrites scalar math.exp/tanh (and, when asked, log) into branch-free
// arith: range reduction, a polynomial, 2^k from the exponent bits. The cases pin the
// algorithm's structure; tests/test_expand_math.py measures its error.
// RUN: tessc-opt %s -p tess-expand-math | filecheck %s
// RUN: tessc-opt %s -p 'tess-expand-math{functions=exp,log dtypes=f32}' | filecheck %s --check-prefix=OPTS

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
