// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse' -t numba | filecheck %s

// An SGD step on fp32 parameters with bfloat16 gradients (as a split-bf16 step reads
// them): a kernel holds a 16-bit float as its bits (uint16), so the bf16 gradient arena is
// tabled like any other, its members read through uint16 carrays and converted on load.

func.func @sgd(%params: tensor<5xf32> {tess.donated}, %params_1: tensor<2x3xf32> {tess.donated}, %params_2: tensor<0xf32> {tess.donated}, %grads: tensor<5xbf16>, %grads_1: tensor<2x3xbf16>, %grads_2: tensor<0xbf16>) -> (tensor<5xf32>, tensor<2x3xf32>, tensor<0xf32>) {
  %0 = tess.cast %grads : tensor<5xbf16> -> tensor<5xf32>
  %1 = tess.fill 1.000000e-02 : tensor<f32>
  %2 = tess.mul %1, %0 : tensor<f32>, tensor<5xf32> -> tensor<5xf32>
  %3 = tess.sub %params, %2 : tensor<5xf32>, tensor<5xf32> -> tensor<5xf32>
  %4 = tess.cast %grads_1 : tensor<2x3xbf16> -> tensor<2x3xf32>
  %5 = tess.fill 1.000000e-02 : tensor<f32>
  %6 = tess.mul %5, %4 : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %7 = tess.sub %params_1, %6 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %8 = tess.cast %grads_2 : tensor<0xbf16> -> tensor<0xf32>
  %9 = tess.fill 1.000000e-02 : tensor<f32>
  %10 = tess.mul %9, %8 : tensor<f32>, tensor<0xf32> -> tensor<0xf32>
  %11 = tess.sub %params_2, %10 : tensor<0xf32>, tensor<0xf32> -> tensor<0xf32>
  func.return %3, %7, %11 : tensor<5xf32>, tensor<2x3xf32>, tensor<0xf32>
}

// The gradient arena (host input 1, bf16 to the caller) is the member form's table.
// CHECK:      "member_tables": ("sgd_members", (1,)),
// CHECK:      MEMBER_BOUNDS_sgd = np.array([0, 5, 11, 11], np.int64)
// CHECK:      def sgd(params_arena, grads_arena, out0):
// CHECK:      def sgd_members(params_arena, grads_arena_table, out0):
// CHECK:          for [[M:member[0-9]+]] in range(3):
// CHECK:              grads_arena = carray(member_pointer(grads_arena_table[[[M]]]), ([[HI:hi[0-9]+]],), np.uint16)
// CHECK-NEXT:         for [[J:i[0-9]+]] in range(np.uint64({{lo[0-9]+}}), np.uint64([[HI]])):
// CHECK:                  [[G:[a-z0-9_]+]] = grads_arena[[[J]]]
// CHECK-NEXT:             {{.*}} = np.float32(bf16_to_f32([[G]]))
