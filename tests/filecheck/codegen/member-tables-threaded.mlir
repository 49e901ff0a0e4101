// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse' -t numba | filecheck %s

// member-tables.mlir's SGD step past the parallel threshold (262,148 elements > 2^18): the
// host is plain Python launching a threaded kernel (codegen.numba_threads), so its member
// form is too: `sgd_members` launches `sgd_kernel_0_members` over the same 17 chunks, each
// share running its part of each member, the gradients read through their table.

func.func @sgd(%params: tensor<131073xf32> {tess.donated}, %params_1: tensor<0xf32> {tess.donated}, %params_2: tensor<131075xf32> {tess.donated}, %grads: tensor<131073xf32>, %grads_1: tensor<0xf32>, %grads_2: tensor<131075xf32>) -> (tensor<131073xf32>, tensor<0xf32>, tensor<131075xf32>) {
  %0 = tess.fill 1.000000e-02 : tensor<f32>
  %1 = tess.mul %0, %grads : tensor<f32>, tensor<131073xf32> -> tensor<131073xf32>
  %2 = tess.sub %params, %1 : tensor<131073xf32>, tensor<131073xf32> -> tensor<131073xf32>
  %3 = tess.fill 1.000000e-02 : tensor<f32>
  %4 = tess.mul %3, %grads_1 : tensor<f32>, tensor<0xf32> -> tensor<0xf32>
  %5 = tess.sub %params_1, %4 : tensor<0xf32>, tensor<0xf32> -> tensor<0xf32>
  %6 = tess.fill 1.000000e-02 : tensor<f32>
  %7 = tess.mul %6, %grads_2 : tensor<f32>, tensor<131075xf32> -> tensor<131075xf32>
  %8 = tess.sub %params_2, %7 : tensor<131075xf32>, tensor<131075xf32> -> tensor<131075xf32>
  func.return %2, %5, %8 : tensor<131073xf32>, tensor<0xf32>, tensor<131075xf32>
}

// CHECK:      from numba import carray, njit, types
// CHECK:      from tessc.runtime.threads import parallel_for
// CHECK:          "member_tables": ("sgd_members", (1,)),
// CHECK:      MEMBER_BOUNDS_sgd = np.array([0, 131073, 131073, 262148], np.int64)
// The plain host packs; its member form launches the member kernel, the table for the arena.
// CHECK:      def sgd(params_arena, grads_arena, out0):
// CHECK-NEXT:     parallel_for(sgd_kernel_0, 17, params_arena, grads_arena, out0)
// CHECK:      def sgd_members(params_arena, grads_arena_table, out0):
// CHECK-NEXT:     parallel_for(sgd_kernel_0_members, 17, params_arena, grads_arena_table, out0)
// The share's elements (chunks of 16,384), then each member's part of them.
// CHECK:      @njit(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def sgd_kernel_0_members(lo, hi, params_arena, grads_arena_table, out0):
// CHECK-NEXT:     [[FIRST:first[0-9]+]] = lo * 16384
// CHECK-NEXT:     [[LAST:last[0-9]+]] = min(hi * 16384, 262148)
// CHECK-NEXT:     for [[M:member[0-9]+]] in range(3):
// CHECK-NEXT:         [[LO:lo[0-9]+]] = max(MEMBER_BOUNDS_sgd[[[M]]], [[FIRST]])
// CHECK-NEXT:         [[HI:hi[0-9]+]] = min(MEMBER_BOUNDS_sgd[[[M]] + 1], [[LAST]])
// CHECK-NEXT:         if [[LO]] >= [[HI]]:
// CHECK-NEXT:             continue
// CHECK-NEXT:         grads_arena = carray(member_pointer(grads_arena_table[[[M]]]), ([[HI]],), np.float32)
// CHECK-NEXT:         for [[J:i[0-9]+]] in range(np.uint64([[LO]]), np.uint64([[HI]])):
// CHECK-NEXT:             {{.*}} = params_arena[[[J]]]
// CHECK-NEXT:             {{.*}} = grads_arena[[[J]]]
// CHECK:                  out0[[[J]]] = {{.*}}
// The plain threaded kernel, unchanged.
// CHECK:      def sgd_kernel_0(lo, hi, params_arena, grads_arena, out0):
// CHECK-NEXT:     for {{chunk[0-9]+}} in range(lo, hi):
