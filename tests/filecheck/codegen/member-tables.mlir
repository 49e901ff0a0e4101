// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse' -t numba | filecheck %s

// An SGD step over three parameters (one of zero size), the parameters donated, as
// `tessc.jit(..., donate_argnums=(0,))` traces it: the packed host reads the gradient
// arena only at the loop index, so it also gets a member form taking that arena as a
// table of addresses (codegen.numba_members), for gradients that are separate arrays.

func.func @sgd(%params: tensor<5xf32> {tess.donated}, %params_1: tensor<2x3xf32> {tess.donated}, %params_2: tensor<0xf32> {tess.donated}, %grads: tensor<5xf32>, %grads_1: tensor<2x3xf32>, %grads_2: tensor<0xf32>) -> (tensor<5xf32>, tensor<2x3xf32>, tensor<0xf32>) {
  %0 = tess.fill 1.000000e-02 : tensor<f32>
  %1 = tess.mul %0, %grads : tensor<f32>, tensor<5xf32> -> tensor<5xf32>
  %2 = tess.sub %params, %1 : tensor<5xf32>, tensor<5xf32> -> tensor<5xf32>
  %3 = tess.fill 1.000000e-02 : tensor<f32>
  %4 = tess.mul %3, %grads_1 : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %5 = tess.sub %params_1, %4 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %6 = tess.fill 1.000000e-02 : tensor<f32>
  %7 = tess.mul %6, %grads_2 : tensor<f32>, tensor<0xf32> -> tensor<0xf32>
  %8 = tess.sub %params_2, %7 : tensor<0xf32>, tensor<0xf32> -> tensor<0xf32>
  func.return %2, %5, %8 : tensor<5xf32>, tensor<2x3xf32>, tensor<0xf32>
}

// The signature names the member form and the host input it takes as a table (the
// gradient arena, input 1; not the donated parameter arena, input 0).
// CHECK:      from numba import carray, njit, types
// CHECK:              "outputs": [((5,), "float32", 0, 0), ((2, 3), "float32", 0, 5), ((0,), "float32", 0, 11)],
// CHECK-NEXT:     },
// CHECK-NEXT:     "member_tables": ("sgd_members", (1,)),
// The members' bounds: the zero-size one is an empty range.
// CHECK:      MEMBER_BOUNDS_sgd = np.array([0, 5, 11, 11], np.int64)
// CHECK:      def member_pointer(typingctx, address):
// The host reads the packed arena.
// CHECK:      def sgd(params_arena, grads_arena, out0):
// CHECK:          for [[I:i[0-9]+]] in range(11):
// CHECK:              {{.*}} = grads_arena[[[I]]]
// The member form: a loop over the members, each gradient read where it lies, through a
// carray at its table entry (its address less its offset), at the same arena index.
// CHECK:      @njit(cache=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def sgd_members(params_arena, grads_arena_table, out0):
// CHECK:          for [[M:member[0-9]+]] in range(3):
// CHECK-NEXT:         [[LO:lo[0-9]+]] = MEMBER_BOUNDS_sgd[[[M]]]
// CHECK-NEXT:         [[HI:hi[0-9]+]] = MEMBER_BOUNDS_sgd[[[M]] + 1]
// CHECK-NEXT:         grads_arena = carray(member_pointer(grads_arena_table[[[M]]]), ([[HI]],), np.float32)
// CHECK-NEXT:         for [[J:i[0-9]+]] in range(np.uint64([[LO]]), np.uint64([[HI]])):
// CHECK-NEXT:             {{.*}} = params_arena[[[J]]]
// CHECK-NEXT:             {{.*}} = grads_arena[[[J]]]
// CHECK:                  out0[[[J]]] = {{.*}}
