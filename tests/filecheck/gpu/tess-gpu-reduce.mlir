// tess-gpu-reduce: reductions (their producers and epilogues fused) become block tree
// reductions in workgroup memory, a barrier after every halving step.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-reduce,canonicalize,cse' | filecheck %s

// The seed's shape: (3,17,1) * (1,17,4) summed over dim 1 is ONE kernel, and no
// (3,17,4) buffer exists. b's innermost dim is an output dim, so it is the column variant:
// 32 x 8 threads, x over consecutive outputs, y over the 17 reduction steps. (In the cuda
// pipeline tess-gpu-contract takes it first, as a matmul.)
func.func @seed(%a: tensor<3x17x1xf32>, %b: tensor<1x17x4xf32>) -> tensor<3x4xf32> {
  %0 = tess.mul %a, %b : tensor<3x17x1xf32>, tensor<1x17x4xf32> -> tensor<3x17x4xf32>
  %1 = tess.sum %0 dims = [1] : tensor<3x17x4xf32> -> tensor<3x4xf32>
  func.return %1 : tensor<3x4xf32>
}
// CHECK-LABEL: func.func @seed(
// CHECK-NOT:     3x17x4
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[X:.+]] = arith.constant 32 : index
// CHECK-DAG:     %[[Y:.+]] = arith.constant 8 : index
// CHECK-NEXT:    "gpu.launch_func"(%[[ONE]], %[[ONE]], %[[ONE]], %[[X]], %[[Y]], %[[ONE]], %out0, %a, %b) <{kernel = @kernels::@seed_kernel_0,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// A row sum of exp: 64 threads per row (33 steps), one block per row.
func.func @rows(%x: tensor<7x33xf32>) -> tensor<7xf32> {
  %0 = tess.exp %x : tensor<7x33xf32>
  %1 = tess.sum %0 dims = [1] : tensor<7x33xf32> -> tensor<7xf32>
  func.return %1 : tensor<7xf32>
}
// CHECK-LABEL: func.func @rows(
// CHECK:         "gpu.launch_func"({{.*}}) <{kernel = @kernels::@rows_kernel_0,

// A whole-tensor mean over 513 elements: two launches through device scratch (3
// partials), the divide fused into the second.
func.func @whole(%x: tensor<513xf32>) -> tensor<f32> {
  %0 = tess.mean %x dims = [0] : tensor<513xf32> -> tensor<f32>
  func.return %0 : tensor<f32>
}
// CHECK-LABEL: func.func @whole(
// CHECK-NEXT:    %[[P:.+]] = memref.alloc() : memref<3xf32>
// CHECK:         "gpu.launch_func"({{.*}}, %x, %[[P]]) <{kernel = @kernels::@whole_kernel_0_0,
// CHECK:         "gpu.launch_func"({{.*}}, %out0, %[[P]]) <{kernel = @kernels::@whole_kernel_0_1,
// CHECK-NEXT:    memref.dealloc %[[P]] : memref<3xf32>

// A tall column sum, (1100,3) over dim 0: one block of outputs would walk 1100 rows, so
// grid y splits them into 3 shares (partials[3, 3]) and a second launch folds those.
func.func @tall(%x: tensor<1100x3xf32>) -> tensor<3xf32> {
  %0 = tess.sum %x dims = [0] : tensor<1100x3xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK-LABEL: func.func @tall(
// CHECK:         %[[TP:.+]] = memref.alloc() : memref<3x3xf32>
// CHECK:         "gpu.launch_func"({{.*}}, %x, %[[TP]]) <{kernel = @kernels::@tall_kernel_0_0,
// CHECK:         "gpu.launch_func"({{.*}}, %out0, %[[TP]]) <{kernel = @kernels::@tall_kernel_0_1,
// CHECK-NEXT:    memref.dealloc %[[TP]] : memref<3x3xf32>

// CHECK:       "gpu.module"() <{sym_name = "kernels"}> ({

// CHECK:         "gpu.func"() <{function_type = (memref<3x4xf32>, memref<3x17x1xf32>, memref<1x17x4xf32>) -> (), known_block_size = array<i32: 32, 8, 1>}> ({
// CHECK-NEXT:    ^bb0(%{{.+}}: memref<1x17x4xf32>, %[[TREE:tree]]: memref<8x32xf32, #gpu.address_space<workgroup>>):
// CHECK-NOT:       memref.alloca
// CHECK-DAG:       %[[TX:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-DAG:       %[[TY:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim y>}> : () -> index
// CHECK:           scf.for %p0 =
// CHECK:             %[[P:.+]] = arith.addi %p0, %[[TX]] : index
// CHECK:             %[[PART:.+]] = scf.if %{{.+}} -> (f32) {
// The output's indices are split once per output, not per step of the loop.
// CHECK-NEXT:          arith.remui %[[P]]
// CHECK-NEXT:          arith.divui %[[P]]
// CHECK-NEXT:          %[[ACC:.+]] = scf.for %r = %[[TY]] to %{{.+}} step %{{.+}} iter_args(%[[A:.+]] = %{{.+}}) -> (f32) {
// CHECK:                 memref.load %a[
// CHECK:                 memref.load %b[
// CHECK-NEXT:            %[[M:.+]] = arith.mulf
// CHECK-NEXT:            %[[S:.+]] = arith.addf %[[A]], %[[M]] : f32
// CHECK-NEXT:            scf.yield %[[S]] : f32
// CHECK:             memref.store %[[PART]], %[[TREE]][%[[TY]], %[[TX]]]
// CHECK-NEXT:        "gpu.barrier"() : () -> ()
// CHECK:             scf.if
// CHECK:               memref.load %[[TREE]][%[[TY]], %[[TX]]]
// CHECK:               arith.addf
// CHECK:               memref.store {{.*}}, %[[TREE]][%[[TY]], %[[TX]]]
// CHECK:             "gpu.barrier"() : () -> ()
// CHECK:             "gpu.barrier"() : () -> ()
// CHECK:             "gpu.barrier"() : () -> ()
// CHECK-NEXT:        %[[Y0:.+]] = arith.cmpi eq, %[[TY]], %{{.+}} : index
// CHECK-NEXT:        %[[LAST:.+]] = arith.andi %[[Y0]], %{{.+}} : i1
// CHECK-NEXT:        scf.if %[[LAST]] {
// CHECK-NEXT:          memref.load %[[TREE]][%{{.+}}, %[[TX]]]
// CHECK:               memref.store {{.*}}, %out0[
// CHECK:         sym_name = "seed_kernel_0", gpu.kernel, workgroup_attributions = 1 : i64, tess.grid_stride, tess.unsigned_indices}
// CHECK:         "gpu.func"() <{function_type = {{.*}}, known_block_size = array<i32: 64, 1, 1>}> ({

// CHECK:         sym_name = "rows_kernel_0", gpu.kernel, workgroup_attributions = 1 : i64, tess.grid_stride, tess.unsigned_indices}

// The first pass: each of 3 blocks folds a strided share into partials[block_id].
// CHECK:         "gpu.func"() <{function_type = (memref<513xf32>, memref<3xf32>) -> (), known_block_size = array<i32: 256, 1, 1>}> ({
// CHECK-NEXT:    ^bb0(%x: memref<513xf32>, %partials: memref<3xf32>, %tree: memref<256xf32, #gpu.address_space<workgroup>>):
// CHECK:           memref.store {{.*}}, %partials[%{{.+}}] : memref<3xf32>
// CHECK:         sym_name = "whole_kernel_0_0", gpu.kernel, workgroup_attributions = 1 : i64, tess.grid_stride, tess.unsigned_indices}
// The second: one block folds the partials, lane 0 stores the sum and divides by 513.
// CHECK:         "gpu.func"() <{function_type = (memref<f32>, memref<3xf32>) -> (), known_block_size = array<i32: 32, 1, 1>, known_grid_size = array<i32: 1, 1, 1>}> ({
// CHECK:           memref.load %partials[
// CHECK:           arith.divf
// CHECK:         sym_name = "whole_kernel_0_1", gpu.kernel, workgroup_attributions = 1 : i64, tess.unsigned_indices}
// CHECK:         "gpu.func"() <{function_type = {{.*}}, known_block_size = array<i32: 32, 8, 1>}> ({

// CHECK:         sym_name = "tall_kernel_0_0", gpu.kernel, workgroup_attributions = 1 : i64, tess.grid_stride, tess.unsigned_indices}
// CHECK:         "gpu.func"() <{function_type = {{.*}}, known_block_size = array<i32: 32, 8, 1>}> ({
// CHECK:         sym_name = "tall_kernel_0_1", gpu.kernel, workgroup_attributions = 1 : i64, tess.grid_stride, tess.unsigned_indices}
