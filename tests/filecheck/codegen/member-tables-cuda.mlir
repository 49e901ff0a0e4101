// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-contract,tess-gpu-reduce,tess-gpu-map,canonicalize,cse' -t numba | filecheck %s

// An SGD step on fp32 parameters with bfloat16 gradients (as a split-bf16 step reads
// them) through the cuda pipeline: the grid-stride kernel reads the gradient arena only at
// its loop index, so the host also gets a member form (codegen.cuda_members) launching a
// member kernel that reads each gradient where it lies, through a device table of their
// addresses: the loop run member by member, each thread at the indices it takes packed.

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

// CHECK:      import ctypes
// CHECK:      from numba import config, cuda, types
// CHECK:      from numba.cuda.np.numpy_support import carray
// CHECK:      "member_tables": ("sgd_members", (1,)),
// CHECK:      def member_pointer(typingctx, address):
// The simulator runs kernels as Python: a table entry is a ctypes pointer there.
// CHECK:          def member_pointer(address):
// CHECK-NEXT:         return ctypes.c_void_p(int(address))
// The packed kernel: one grid-stride loop over the arena.
// CHECK:      def sgd_kernel_0(params_arena, grads_arena, out0):
// CHECK:          while l < u11:
// CHECK:      MEMBER_BOUNDS_sgd = np.array([0, 5, 11, 11], np.int64)
// The member kernel: the same loop, member by member, each thread from its own start.
// CHECK:      @cuda.jit(cache=True)
// CHECK-NEXT: def sgd_kernel_0_members(params_arena, grads_arena_table, out0):
// CHECK:          [[START:add[0-9]+]] = {{.*}}
// CHECK-NEXT:     [[STEP:mul[0-9]+]] = bdx * gdx
// CHECK-NEXT:     for [[M:member[0-9]+]] in range(3):
// CHECK-NEXT:         [[LO:lo[0-9]+]] = np.uint64(MEMBER_BOUNDS_sgd[[[M]]])
// CHECK-NEXT:         [[HI:hi[0-9]+]] = np.uint64(MEMBER_BOUNDS_sgd[[[M]] + 1])
// CHECK-NEXT:         grads_arena = carray(member_pointer(grads_arena_table[[[M]]]), (MEMBER_BOUNDS_sgd[[[M]] + 1],), np.uint16)
// CHECK-NEXT:         l = [[START]]
// CHECK-NEXT:         if l < [[LO]]:
// CHECK-NEXT:             l = [[LO]] + ([[STEP]] - ([[LO]] - l) % [[STEP]]) % [[STEP]]
// CHECK-NEXT:         while l < [[HI]]:
// CHECK-NEXT:             {{.*}} = params_arena[l]
// CHECK-NEXT:             [[G:ld[0-9]+]] = grads_arena[l]
// CHECK-NEXT:             {{.*}} = np.float32(bf16_to_f32([[G]]))
// CHECK:                  l += [[STEP]]
// The host's member form launches the member kernel with the table, on the same grid.
// CHECK:      def sgd(params_arena, grads_arena, out0, buffers):
// CHECK-NEXT:     sgd_kernel_0[strided_grid(1, 1, 1, 32), (32, 1, 1)](params_arena, grads_arena, out0)
// CHECK:      def sgd_members(params_arena, grads_arena_table, out0, buffers):
// CHECK-NEXT:     sgd_kernel_0_members[strided_grid(1, 1, 1, 32), (32, 1, 1)](params_arena, grads_arena_table, out0)
