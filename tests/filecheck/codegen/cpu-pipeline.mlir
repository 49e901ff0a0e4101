// RUN: tessc-opt %s -p 'tess-to-linalg,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse' -t numba | filecheck %s

// A tess program through the unfused cpu pipeline to Numba source: one kernel per op, the
// matmul i-k-j with the unit-stride j innermost, results as out-params.

func.func @layer(%x: tensor<256x128xf32>, %w: tensor<128x256xf32>, %b: tensor<256xf32>) -> tensor<256x256xf32> {
  %0 = tess.matmul %x, %w : tensor<256x128xf32>, tensor<128x256xf32> -> tensor<256x256xf32>
  %1 = tess.add %0, %b : tensor<256x256xf32>, tensor<256xf32> -> tensor<256x256xf32>
  %2 = tess.relu %1 : tensor<256x256xf32>
  func.return %2 : tensor<256x256xf32>
}

// CHECK:      TESSC_SIGNATURES = {
// CHECK-NEXT:     "layer": {
// CHECK-NEXT:         "function": "layer",
// CHECK-NEXT:         "inputs": [((256, 128), "float32"), ((128, 256), "float32"), ((256,), "float32")],
// CHECK-NEXT:         "input_names": ["x", "w", "b"],
// CHECK-NEXT:         "outputs": [((256, 256), "float32")],

// The bias add and the relu (2^16 iterations each, below the parallel threshold) run
// serially, emitted into the host's body; the matmul is a parallel kernel it calls.
// CHECK:      @njit(cache=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def layer(x, w, b, [[OUT:.*]]):
// CHECK:          layer_kernel_{{[0-9]+}}(x, w, [[MM:.*]])
// CHECK:          # layer_kernel_{{[0-9]+}}
// CHECK:                  {{.*}} = [[MM]][{{.*}}]
// CHECK:                  [[BIAS:[a-z0-9_]+]][{{.*}}] = {{.*}}
// CHECK:          # layer_kernel_{{[0-9]+}}
// CHECK:                  {{.*}} = [[BIAS]][{{.*}}]
// CHECK-NEXT:             {{.*}} = fmaximum({{.*}}, np.float32(0.0))
// CHECK-NEXT:             [[OUT]][{{.*}}] = {{.*}}

// The matmul: i parallel, then k, then j (unit stride in both w and the output).
// CHECK:      def layer_kernel_{{[0-9]+}}(x, w, {{.*}}):
// CHECK-NEXT:     for [[I:.*]] in prange(256):
// CHECK-NEXT:         for [[K:.*]] in range(128):
// CHECK-NEXT:             for [[J:.*]] in range(256):
// CHECK-DAG:                  {{.*}} = x[[[I]], [[K]]]
// CHECK-DAG:                  {{.*}} = w[[[K]], [[J]]]
