// tess-gpu-contract: contractions become 64x64 output tiles per 16x16-thread block, a 4x4
// register tile per thread; operands are staged through double-buffered, k-major workgroup
// tiles 16 k steps deep (the next tile's global loads before this tile's unrolled k steps,
// one barrier per tile); bounds checks only where a tile overhangs; the epilogue is fused
// and each output stored once; index arithmetic unsigned (`tess.unsigned_indices`).
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-contract,canonicalize,cse' | filecheck %s

// relu(x @ w + b), (45,33) @ (33,40): ONE launch, one 64 x 64 tile.
func.func @dense(%x: tensor<45x33xf32>, %w: tensor<33x40xf32>, %b: tensor<40xf32>) -> tensor<45x40xf32> {
  %0 = tess.matmul %x, %w : tensor<45x33xf32>, tensor<33x40xf32> -> tensor<45x40xf32>
  %1 = tess.add %0, %b : tensor<45x40xf32>, tensor<40xf32> -> tensor<45x40xf32>
  %2 = tess.relu %1 : tensor<45x40xf32>
  func.return %2 : tensor<45x40xf32>
}
// CHECK-LABEL: func.func @dense(
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[T:.+]] = arith.constant 16 : index
// CHECK-NEXT:    "gpu.launch_func"(%[[ONE]], %[[ONE]], %[[ONE]], %[[T]], %[[T]], %[[ONE]], %out0, %x, %w, %b) <{kernel = @kernels::@dense_kernel_0,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// A batched matmul: the batch is the grid's z.
func.func @batched(%a: tensor<2x5x33xf64>, %b: tensor<2x33x6xf64>) -> tensor<2x5x6xf64> {
  %0 = tess.matmul %a, %b : tensor<2x5x33xf64>, tensor<2x33x6xf64> -> tensor<2x5x6xf64>
  func.return %0 : tensor<2x5x6xf64>
}
// CHECK-LABEL: func.func @batched(
// CHECK:         "gpu.launch_func"(%{{.+}}, %{{.+}}, %[[B:.+]], %{{.+}}, %{{.+}}, %{{.+}}, %out0, %a, %b)

// Sizes multiples of the tiles: no bounds check anywhere, 4 k tiles.
func.func @exact(%a: tensor<128x64xf32>, %b: tensor<64x64xf32>) -> tensor<128x64xf32> {
  %0 = tess.matmul %a, %b : tensor<128x64xf32>, tensor<64x64xf32> -> tensor<128x64xf32>
  func.return %0 : tensor<128x64xf32>
}
// CHECK-LABEL: func.func @exact(

// CHECK:       "gpu.module"() <{sym_name = "kernels"}> ({
// CHECK:         "gpu.func"() <{function_type = (memref<45x40xf32>, memref<45x33xf32>, memref<33x40xf32>, memref<40xf32>) -> (), known_block_size = array<i32: 16, 16, 1>, known_grid_size = array<i32: 1, 1, 1>}> ({
// The tiles are workgroup attributions (block-shared), the entry block's last arguments:
// [buffer, k, 64 + 4 of padding].
// CHECK-NEXT:    ^bb0(%{{.+}}: memref<40xf32>, %[[TA:row_tile]]: memref<2x16x68xf32, #gpu.address_space<workgroup>>, %[[TB:col_tile]]: memref<2x16x68xf32, #gpu.address_space<workgroup>>):
// CHECK-NOT:       memref.alloca
// CHECK-DAG:       %[[TX:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-DAG:       %[[TY:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim y>}> : () -> index
// The first k tile: four loads of x (the thread's x index along k: x's innermost dim), each
// checked against the 45 rows only (k tile 0 is whole), then four of w ...
// CHECK:           %[[ROW:.+]] = arith.cmpi ult, %{{.+}}, %{{.+}} : index
// CHECK-NEXT:      scf.if %[[ROW]] -> (f32) {
// CHECK-NEXT:        memref.load %x[%{{.+}}, %[[TX]]]
// CHECK-COUNT-3:     memref.load %x[
// CHECK-COUNT-4:     memref.load %w[
// ... stored k-major into buffer 0 of each tile.
// CHECK:           memref.store %{{.+}}, %[[TA]][%{{.+}}, %[[TX]], %[[TY]]]
// CHECK:           memref.store %{{.+}}, %[[TB]][%{{.+}}, %[[TY]], %[[TX]]]
// CHECK:           "gpu.barrier"() : () -> ()
// The k tiles that have a next one: 16 accumulators carried.
// CHECK-NEXT:      %[[ACC:[0-9a-z_]+]], {{.*}} = scf.for %kt = %{{.+}} to %{{.+}} step %{{.+}} iter_args({{.*}}) -> ({{(f32, )+}}f32) {
// The next tile's loads first (into registers; checked against K too) ...
// CHECK:             %[[NEXT:.+]] = arith.remui
// CHECK-COUNT-4:     memref.load %x[
// CHECK-COUNT-4:     memref.load %w[
// ... then this tile's 16 k steps, unrolled: a thread's 4 rows and 4 columns are adjacent
// in a k row of each tile, 16 multiply-adds a step ...
// CHECK:             %[[CUR:.+]] = arith.remui %kt,
// CHECK:             %[[L0:.+]] = memref.load %[[TA]][%[[CUR]], %{{.+}}, %{{.+}}]
// CHECK-COUNT-3:     memref.load %[[TA]][%[[CUR]],
// CHECK-COUNT-4:     memref.load %[[TB]][%[[CUR]],
// CHECK-NEXT:        arith.mulf %[[L0]], %{{.+}} : f32
// CHECK-COUNT-255:   arith.mulf
// CHECK-NOT:         arith.mulf
// ... then the next tile into the other buffer, one barrier.
// CHECK:             memref.store %{{.+}}, %[[TA]][%[[NEXT]],
// CHECK:             "gpu.barrier"() : () -> ()
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      }
// The last tile: 33 = 2 * 16 + 1, one k step.
// CHECK-COUNT-16:  arith.mulf
// CHECK-NOT:       arith.mulf
// Each of the 16 outputs, in range: the bias and relu on the sum, ONE store.
// CHECK:           scf.if
// CHECK-NEXT:        %[[V:.+]] = arith.addf %{{.+}}, %{{.+}} : f32
// CHECK-NEXT:        %[[BIAS:.+]] = memref.load %b[
// CHECK-NEXT:        %[[Y:.+]] = arith.addf %[[V]], %[[BIAS]] : f32
// CHECK-NEXT:        %[[R:.+]] = arith.maximumf %[[Y]], %{{.+}} : f32
// CHECK-NEXT:        memref.store %[[R]], %out0[
// CHECK-NEXT:      }
// CHECK-COUNT-15:  memref.store %{{.+}}, %out0[
// CHECK-NOT:       memref.store
// CHECK:         sym_name = "dense_kernel_0", gpu.kernel, workgroup_attributions = 2 : i64, tess.unsigned_indices}

// CHECK:         "gpu.func"() <{function_type = {{.*}}, known_block_size = array<i32: 16, 16, 1>, known_grid_size = array<i32: 1, 1, 2>}> ({
// CHECK:           "gpu.block_id"() <{dimension = #gpu<dim z>}> : () -> index
// The next batch's first tile overwrites buffer 0: a barrier after the last k steps.
// CHECK:             scf.yield {{.*}} : f64, f64
// CHECK-COUNT-16:    arith.mulf
// CHECK:             "gpu.barrier"() : () -> ()
// CHECK-NOT:         arith.mulf
// CHECK:             scf.if
// CHECK:         sym_name = "batched_kernel_0", gpu.kernel, workgroup_attributions = 2 : i64, tess.unsigned_indices}

// CHECK:         "gpu.func"() <{function_type = (memref<128x64xf32>, memref<128x64xf32>, memref<64x64xf32>) -> (), known_block_size = array<i32: 16, 16, 1>, known_grid_size = array<i32: 1, 2, 1>}> ({
// CHECK-NOT:       scf.if
// CHECK:           scf.for %kt
// CHECK-NOT:       scf.if
// CHECK:         sym_name = "exact_kernel_0",
