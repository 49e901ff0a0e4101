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
// serially, each a compiled function of its own; the matmul is a threaded kernel. The host
// only makes buffers and calls them, so it is plain Python, launching the matmul on the
// threads of `tessc.runtime.threads` (a parfor would compile its body twice).
// CHECK:      def layer(x, w, b, [[OUT:.*]]):
// CHECK-NEXT:     [[MM:buf[0-9]+]] = np.empty((256, 256), dtype=np.float32)
// CHECK-NEXT:     [[ZERO:layer_kernel_[0-9]+]]([[MM]])
// CHECK-NEXT:     parallel_for([[MATMUL:layer_kernel_[0-9]+]], 256, x, w, [[MM]])
// CHECK-NEXT:     [[BIAS:buf[0-9]+]] = np.empty((256, 256), dtype=np.float32)
// CHECK-NEXT:     [[ADD:layer_kernel_[0-9]+]]([[MM]], b, [[BIAS]])
// CHECK-NEXT:     [[RELU:layer_kernel_[0-9]+]]([[BIAS]], [[OUT]])
// CHECK-NOT:  prange
// CHECK:      @njit(cache=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def [[ZERO]](

// The matmul: i parallel (a share `range(lo, hi)` of it per thread), then k, then j (unit
// stride in both w and the output).
// CHECK:      @njit(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def [[MATMUL]](lo, hi, x, w, {{.*}}):
// CHECK-NEXT:     for [[I:.*]] in range(np.uint64(lo), np.uint64(hi)):
// CHECK-NEXT:         for [[K:.*]] in range(128):
// CHECK-NEXT:             for [[J:.*]] in range(256):
// CHECK-DAG:                  {{.*}} = x[[[I]], [[K]]]
// CHECK-DAG:                  {{.*}} = w[[[K]], [[J]]]
