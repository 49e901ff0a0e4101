// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse' -t numba | filecheck %s

// member-tables-lamb.mlir's Lamb step with parameters of 131072, 2x65536 and 65537 floats:
// past the parallel threshold, its two kernels are parallel functions the host calls. Each
// kernel reading the gradient arena gets a member form of its own (the gradient argument a
// table, each chunk reading the member it lies in), and the host's member form calls them.

// CHECK:      "member_tables": ("lamb_large_members", (1,)),
// Chunks of 16384 elements: 8, 8 and 5 of them in the three members.
// CHECK:      SEGMENT_MEMBERS_lamb_large = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2], np.int64)
// CHECK:      MEMBER_BOUNDS_lamb_large = np.array([0, 131072, 262144, 327681], np.int64)
// CHECK:      def lamb_large(params_arena, grads_arena, {{.*}}, workspace):
// CHECK:          lamb_large_kernel_0({{.*}}, grads_arena, {{.*}})
// CHECK-NEXT:     lamb_large_kernel_1({{.*}}, grads_arena, {{.*}})
// CHECK:      @njit(cache=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def lamb_large_members(params_arena, grads_arena_table, {{.*}}, workspace):
// CHECK:          lamb_large_kernel_0_members({{.*}}, grads_arena_table, {{.*}})
// CHECK-NEXT:     lamb_large_kernel_1_members({{.*}}, grads_arena_table, {{.*}})
// CHECK:      @njit(parallel=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def lamb_large_kernel_0_members({{.*}}, grads_arena_table, {{.*}}):
// CHECK:          for [[R:i[0-9_]+]] in prange(21):
// CHECK:              [[M:member[0-9]+]] = SEGMENT_MEMBERS_lamb_large[[[R]]]
// CHECK-NEXT:         grads_arena = carray(member_pointer(grads_arena_table[[[M]]]), ({{.*}},), np.float32)
// CHECK:                  {{.*}} = grads_arena[{{.*}}]
// CHECK:      @njit(parallel=True, fastmath=FASTMATH, error_model="numpy")
// CHECK-NEXT: def lamb_large_kernel_1_members({{.*}}, grads_arena_table, {{.*}}):
// CHECK:          for [[R1:i[0-9_]+]] in prange(21):
// CHECK:              [[M1:member[0-9]+]] = SEGMENT_MEMBERS_lamb_large[[[R1]]]
// CHECK-NEXT:         grads_arena = carray(member_pointer(grads_arena_table[[[M1]]]), ({{.*}},), np.float32)
// The plain kernels read the packed arena.
// CHECK:      def lamb_large_kernel_0({{.*}}, grads_arena, {{.*}}):
// CHECK-NOT:  member
// CHECK:      def lamb_large_kernel_1({{.*}}, grads_arena, {{.*}}):
// CHECK-NOT:  member

func.func @lamb_large(%params: tensor<131072xf32> {tess.donated}, %params_1: tensor<2x65536xf32> {tess.donated}, %params_2: tensor<65537xf32> {tess.donated}, %grads: tensor<131072xf32>, %grads_1: tensor<2x65536xf32>, %grads_2: tensor<65537xf32>, %state_exp_avg: tensor<131072xf32> {tess.donated}, %state_exp_avg_1: tensor<2x65536xf32> {tess.donated}, %state_exp_avg_2: tensor<65537xf32> {tess.donated}, %state_exp_avg_sq: tensor<131072xf32> {tess.donated}, %state_exp_avg_sq_1: tensor<2x65536xf32> {tess.donated}, %state_exp_avg_sq_2: tensor<65537xf32> {tess.donated}, %state_step: tensor<f32> {tess.donated}) -> (tensor<131072xf32>, tensor<2x65536xf32>, tensor<65537xf32>, tensor<131072xf32>, tensor<2x65536xf32>, tensor<65537xf32>, tensor<131072xf32>, tensor<2x65536xf32>, tensor<65537xf32>, tensor<f32>) {
  %0 = tess.fill 1.000000e+00 : tensor<f32>
  %1 = tess.add %state_step, %0 : tensor<f32>, tensor<f32> -> tensor<f32>
  %2 = tess.fill 9.000000e-01 : tensor<f32>
  %3 = tess.pow %2, %1 : tensor<f32>, tensor<f32> -> tensor<f32>
  %4 = tess.fill 1.000000e+00 : tensor<f32>
  %5 = tess.sub %4, %3 : tensor<f32>, tensor<f32> -> tensor<f32>
  %6 = tess.fill 9.990000e-01 : tensor<f32>
  %7 = tess.pow %6, %1 : tensor<f32>, tensor<f32> -> tensor<f32>
  %8 = tess.fill 1.000000e+00 : tensor<f32>
  %9 = tess.sub %8, %7 : tensor<f32>, tensor<f32> -> tensor<f32>
  %10 = tess.fill 9.000000e-01 : tensor<f32>
  %11 = tess.mul %10, %state_exp_avg : tensor<f32>, tensor<131072xf32> -> tensor<131072xf32>
  %12 = tess.fill 0.099999999999999978 : tensor<f32>
  %13 = tess.mul %12, %grads : tensor<f32>, tensor<131072xf32> -> tensor<131072xf32>
  %14 = tess.add %11, %13 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %15 = tess.fill 9.990000e-01 : tensor<f32>
  %16 = tess.mul %15, %state_exp_avg_sq : tensor<f32>, tensor<131072xf32> -> tensor<131072xf32>
  %17 = tess.mul %grads, %grads : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %18 = tess.fill 0.0010000000000000009 : tensor<f32>
  %19 = tess.mul %18, %17 : tensor<f32>, tensor<131072xf32> -> tensor<131072xf32>
  %20 = tess.add %16, %19 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %21 = tess.div %14, %5 : tensor<131072xf32>, tensor<f32> -> tensor<131072xf32>
  %22 = tess.div %20, %9 : tensor<131072xf32>, tensor<f32> -> tensor<131072xf32>
  %23 = tess.sqrt %22 : tensor<131072xf32>
  %24 = tess.fill 1.000000e-06 : tensor<f32>
  %25 = tess.add %23, %24 : tensor<131072xf32>, tensor<f32> -> tensor<131072xf32>
  %26 = tess.div %21, %25 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %27 = tess.fill 1.000000e-02 : tensor<f32>
  %28 = tess.mul %27, %params : tensor<f32>, tensor<131072xf32> -> tensor<131072xf32>
  %29 = tess.add %26, %28 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %30 = tess.mul %params, %params : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %31 = tess.sum %30 dims = [0] : tensor<131072xf32> -> tensor<f32>
  %32 = tess.sqrt %31 : tensor<f32>
  %33 = tess.mul %29, %29 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %34 = tess.sum %33 dims = [0] : tensor<131072xf32> -> tensor<f32>
  %35 = tess.sqrt %34 : tensor<f32>
  %36 = tess.fill 0.000000e+00 : tensor<f32>
  %37 = tess.gt %32, %36 : tensor<f32>, tensor<f32> -> tensor<f32>
  %38 = tess.fill 0.000000e+00 : tensor<f32>
  %39 = tess.gt %35, %38 : tensor<f32>, tensor<f32> -> tensor<f32>
  %40 = tess.fill 1.000000e+00 : tensor<f32>
  %41 = tess.select %39, %35, %40 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %42 = tess.div %32, %41 : tensor<f32>, tensor<f32> -> tensor<f32>
  %43 = tess.fill 1.000000e+00 : tensor<f32>
  %44 = tess.select %37, %42, %43 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %45 = tess.fill 0.000000e+00 : tensor<f32>
  %46 = tess.gt %35, %45 : tensor<f32>, tensor<f32> -> tensor<f32>
  %47 = tess.fill 1.000000e+00 : tensor<f32>
  %48 = tess.select %46, %44, %47 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %49 = tess.fill 1.000000e-03 : tensor<f32>
  %50 = tess.mul %49, %48 : tensor<f32>, tensor<f32> -> tensor<f32>
  %51 = tess.div %14, %5 : tensor<131072xf32>, tensor<f32> -> tensor<131072xf32>
  %52 = tess.div %20, %9 : tensor<131072xf32>, tensor<f32> -> tensor<131072xf32>
  %53 = tess.sqrt %52 : tensor<131072xf32>
  %54 = tess.fill 1.000000e-06 : tensor<f32>
  %55 = tess.add %53, %54 : tensor<131072xf32>, tensor<f32> -> tensor<131072xf32>
  %56 = tess.div %51, %55 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %57 = tess.fill 1.000000e-02 : tensor<f32>
  %58 = tess.mul %57, %params : tensor<f32>, tensor<131072xf32> -> tensor<131072xf32>
  %59 = tess.add %56, %58 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %60 = tess.mul %50, %59 : tensor<f32>, tensor<131072xf32> -> tensor<131072xf32>
  %61 = tess.sub %params, %60 : tensor<131072xf32>, tensor<131072xf32> -> tensor<131072xf32>
  %62 = tess.fill 9.000000e-01 : tensor<f32>
  %63 = tess.mul %62, %state_exp_avg_1 : tensor<f32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %64 = tess.fill 0.099999999999999978 : tensor<f32>
  %65 = tess.mul %64, %grads_1 : tensor<f32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %66 = tess.add %63, %65 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %67 = tess.fill 9.990000e-01 : tensor<f32>
  %68 = tess.mul %67, %state_exp_avg_sq_1 : tensor<f32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %69 = tess.mul %grads_1, %grads_1 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %70 = tess.fill 0.0010000000000000009 : tensor<f32>
  %71 = tess.mul %70, %69 : tensor<f32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %72 = tess.add %68, %71 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %73 = tess.div %66, %5 : tensor<2x65536xf32>, tensor<f32> -> tensor<2x65536xf32>
  %74 = tess.div %72, %9 : tensor<2x65536xf32>, tensor<f32> -> tensor<2x65536xf32>
  %75 = tess.sqrt %74 : tensor<2x65536xf32>
  %76 = tess.fill 1.000000e-06 : tensor<f32>
  %77 = tess.add %75, %76 : tensor<2x65536xf32>, tensor<f32> -> tensor<2x65536xf32>
  %78 = tess.div %73, %77 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %79 = tess.fill 1.000000e-02 : tensor<f32>
  %80 = tess.mul %79, %params_1 : tensor<f32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %81 = tess.add %78, %80 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %82 = tess.mul %params_1, %params_1 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %83 = tess.sum %82 dims = [0, 1] : tensor<2x65536xf32> -> tensor<f32>
  %84 = tess.sqrt %83 : tensor<f32>
  %85 = tess.mul %81, %81 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %86 = tess.sum %85 dims = [0, 1] : tensor<2x65536xf32> -> tensor<f32>
  %87 = tess.sqrt %86 : tensor<f32>
  %88 = tess.fill 0.000000e+00 : tensor<f32>
  %89 = tess.gt %84, %88 : tensor<f32>, tensor<f32> -> tensor<f32>
  %90 = tess.fill 0.000000e+00 : tensor<f32>
  %91 = tess.gt %87, %90 : tensor<f32>, tensor<f32> -> tensor<f32>
  %92 = tess.fill 1.000000e+00 : tensor<f32>
  %93 = tess.select %91, %87, %92 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %94 = tess.div %84, %93 : tensor<f32>, tensor<f32> -> tensor<f32>
  %95 = tess.fill 1.000000e+00 : tensor<f32>
  %96 = tess.select %89, %94, %95 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %97 = tess.fill 0.000000e+00 : tensor<f32>
  %98 = tess.gt %87, %97 : tensor<f32>, tensor<f32> -> tensor<f32>
  %99 = tess.fill 1.000000e+00 : tensor<f32>
  %100 = tess.select %98, %96, %99 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %101 = tess.fill 1.000000e-03 : tensor<f32>
  %102 = tess.mul %101, %100 : tensor<f32>, tensor<f32> -> tensor<f32>
  %103 = tess.div %66, %5 : tensor<2x65536xf32>, tensor<f32> -> tensor<2x65536xf32>
  %104 = tess.div %72, %9 : tensor<2x65536xf32>, tensor<f32> -> tensor<2x65536xf32>
  %105 = tess.sqrt %104 : tensor<2x65536xf32>
  %106 = tess.fill 1.000000e-06 : tensor<f32>
  %107 = tess.add %105, %106 : tensor<2x65536xf32>, tensor<f32> -> tensor<2x65536xf32>
  %108 = tess.div %103, %107 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %109 = tess.fill 1.000000e-02 : tensor<f32>
  %110 = tess.mul %109, %params_1 : tensor<f32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %111 = tess.add %108, %110 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %112 = tess.mul %102, %111 : tensor<f32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %113 = tess.sub %params_1, %112 : tensor<2x65536xf32>, tensor<2x65536xf32> -> tensor<2x65536xf32>
  %114 = tess.fill 9.000000e-01 : tensor<f32>
  %115 = tess.mul %114, %state_exp_avg_2 : tensor<f32>, tensor<65537xf32> -> tensor<65537xf32>
  %116 = tess.fill 0.099999999999999978 : tensor<f32>
  %117 = tess.mul %116, %grads_2 : tensor<f32>, tensor<65537xf32> -> tensor<65537xf32>
  %118 = tess.add %115, %117 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %119 = tess.fill 9.990000e-01 : tensor<f32>
  %120 = tess.mul %119, %state_exp_avg_sq_2 : tensor<f32>, tensor<65537xf32> -> tensor<65537xf32>
  %121 = tess.mul %grads_2, %grads_2 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %122 = tess.fill 0.0010000000000000009 : tensor<f32>
  %123 = tess.mul %122, %121 : tensor<f32>, tensor<65537xf32> -> tensor<65537xf32>
  %124 = tess.add %120, %123 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %125 = tess.div %118, %5 : tensor<65537xf32>, tensor<f32> -> tensor<65537xf32>
  %126 = tess.div %124, %9 : tensor<65537xf32>, tensor<f32> -> tensor<65537xf32>
  %127 = tess.sqrt %126 : tensor<65537xf32>
  %128 = tess.fill 1.000000e-06 : tensor<f32>
  %129 = tess.add %127, %128 : tensor<65537xf32>, tensor<f32> -> tensor<65537xf32>
  %130 = tess.div %125, %129 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %131 = tess.fill 1.000000e-02 : tensor<f32>
  %132 = tess.mul %131, %params_2 : tensor<f32>, tensor<65537xf32> -> tensor<65537xf32>
  %133 = tess.add %130, %132 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %134 = tess.mul %params_2, %params_2 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %135 = tess.sum %134 dims = [0] : tensor<65537xf32> -> tensor<f32>
  %136 = tess.sqrt %135 : tensor<f32>
  %137 = tess.mul %133, %133 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %138 = tess.sum %137 dims = [0] : tensor<65537xf32> -> tensor<f32>
  %139 = tess.sqrt %138 : tensor<f32>
  %140 = tess.fill 0.000000e+00 : tensor<f32>
  %141 = tess.gt %136, %140 : tensor<f32>, tensor<f32> -> tensor<f32>
  %142 = tess.fill 0.000000e+00 : tensor<f32>
  %143 = tess.gt %139, %142 : tensor<f32>, tensor<f32> -> tensor<f32>
  %144 = tess.fill 1.000000e+00 : tensor<f32>
  %145 = tess.select %143, %139, %144 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %146 = tess.div %136, %145 : tensor<f32>, tensor<f32> -> tensor<f32>
  %147 = tess.fill 1.000000e+00 : tensor<f32>
  %148 = tess.select %141, %146, %147 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %149 = tess.fill 0.000000e+00 : tensor<f32>
  %150 = tess.gt %139, %149 : tensor<f32>, tensor<f32> -> tensor<f32>
  %151 = tess.fill 1.000000e+00 : tensor<f32>
  %152 = tess.select %150, %148, %151 : tensor<f32>, tensor<f32>, tensor<f32> -> tensor<f32>
  %153 = tess.fill 1.000000e-03 : tensor<f32>
  %154 = tess.mul %153, %152 : tensor<f32>, tensor<f32> -> tensor<f32>
  %155 = tess.div %118, %5 : tensor<65537xf32>, tensor<f32> -> tensor<65537xf32>
  %156 = tess.div %124, %9 : tensor<65537xf32>, tensor<f32> -> tensor<65537xf32>
  %157 = tess.sqrt %156 : tensor<65537xf32>
  %158 = tess.fill 1.000000e-06 : tensor<f32>
  %159 = tess.add %157, %158 : tensor<65537xf32>, tensor<f32> -> tensor<65537xf32>
  %160 = tess.div %155, %159 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %161 = tess.fill 1.000000e-02 : tensor<f32>
  %162 = tess.mul %161, %params_2 : tensor<f32>, tensor<65537xf32> -> tensor<65537xf32>
  %163 = tess.add %160, %162 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  %164 = tess.mul %154, %163 : tensor<f32>, tensor<65537xf32> -> tensor<65537xf32>
  %165 = tess.sub %params_2, %164 : tensor<65537xf32>, tensor<65537xf32> -> tensor<65537xf32>
  func.return %61, %113, %165, %14, %66, %118, %20, %72, %124, %1 : tensor<131072xf32>, tensor<2x65536xf32>, tensor<65537xf32>, tensor<131072xf32>, tensor<2x65536xf32>, tensor<65537xf32>, tensor<131072xf32>, tensor<2x65536xf32>, tensor<65537xf32>, tensor<f32>
}
