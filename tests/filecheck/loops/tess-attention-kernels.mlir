// tess-attention-kernels writes the loop nest of each declaration tess-to-linalg made for
// an attention op (here already bufferized: out-params), and marks it tess.kernel. The
// forward: parallel over batch and query rows; the keys in blocks of 64 (a 64-long scratch
// per row, never the (L, S) scores), the running maximum and sum carried by the block loop,
// the output row rescaled once per block; a bool mask's size-1 dim read at index 0. The
// key/value gradients: parallel over key rows, the causal query rows i >= j (a test in a
// loop of static trip count) streamed, each probability recomputed from the row logsumexp. (canonicalize and cse only tidy.)
// RUN: tessc-opt %s -p tess-attention-kernels,canonicalize,cse | filecheck %s
// RUN: tessc-opt %s -p 'tess-attention-kernels{block=16}' | filecheck %s --check-prefix=BLOCK

func.func private @forward(memref<2x3x4xf32>, memref<2x150x4xf32>, memref<2x150x6xf32>, memref<1x3x150xi1>, memref<2x3x6xf32>, memref<2x3xf32>) attributes {tess.attention_kernel = {computes = ["out", "lse"], scale = 5.000000e-01 : f64, causal = false}, tess.num_outputs = 2 : i64}
func.func private @dkv(memref<3x4xf64>, memref<5x4xf64>, memref<5x6xf64>, memref<3xf64>, memref<3xf64>, memref<3x6xf64>, memref<5x4xf64>, memref<5x6xf64>) attributes {tess.attention_kernel = {computes = ["dk", "dv"], scale = 5.000000e-01 : f64, causal = true}, tess.num_outputs = 2 : i64}

// CHECK-LABEL: func.func private @forward(%0: memref<2x3x4xf32>, %1: memref<2x150x4xf32>, %2: memref<2x150x6xf32>, %3: memref<1x3x150xi1>, %4: memref<2x3x6xf32>, %5: memref<2x3xf32>)
// CHECK-SAME:    tess.kernel
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%b0: index, %r: index):
// CHECK:           memref.store %{{.*}}, %4[%b0, %r, %e] : memref<2x3x6xf32>
// CHECK:           %[[SCORES:.*]] = memref.alloc() : memref<64xf32>
// CHECK:           %[[MAX:.*]], %[[SUM:.*]] = scf.for %j0 = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %[[NEG_INF:.*]], %{{.*}} = %{{.*}}) -> (f32, f32) {
// CHECK:             arith.minsi
// CHECK:             scf.for %jj = {{.*}} iter_args({{.*}}) -> (f32) {
// CHECK:               memref.load %3[%{{.*}}, %r, %{{.*}}] : memref<1x3x150xi1>
// CHECK-NEXT:          arith.select %{{.*}}, %{{.*}}, %[[NEG_INF]] : f32
// CHECK-NEXT:          memref.store %{{.*}}, %[[SCORES]][%jj] : memref<64xf32>
// CHECK-NEXT:          arith.maximumf
// CHECK:             math.exp
// CHECK:             scf.for %jj_1 =
// CHECK-NEXT:          memref.load %[[SCORES]][%jj_1] : memref<64xf32>
// CHECK:               math.exp
// CHECK:           math.log %[[SUM]] : f32
// CHECK:           memref.store %{{.*}}, %5[%b0, %r] : memref<2x3xf32>
// CHECK-NOT:     memref.alloc(
// CHECK:         func.return

// CHECK-LABEL: func.func private @dkv(
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%r: index):
// CHECK:           scf.for %i = %{{.*}} to %{{.*}} step
// CHECK-NEXT:        %[[SEES:.*]] = arith.cmpi sge, %i, %r : index
// CHECK-NEXT:        scf.if %[[SEES]] {
// CHECK-NEXT:          memref.load %3[%i] : memref<3xf64>
// CHECK:             math.exp
// CHECK:             memref.store %{{.*}}, %7[%r, %e{{.*}}] : memref<5x6xf64>
// CHECK:             memref.store %{{.*}}, %6[%r, %e{{.*}}] : memref<5x4xf64>

// BLOCK: memref.alloc() : memref<16xf32>
