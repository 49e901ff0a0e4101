// tess-gpu-contract: contractions become 32x32 output tiles per 16x16-thread block, 2x2
// outputs per thread, operands staged through workgroup memory one k tile at a time
// (a barrier after loading, one before the next load), the epilogue fused.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-contract,canonicalize,cse' | filecheck %s

// relu(x @ w + b), (45,33) @ (33,40): ONE launch, grid 2 x 2 tiles.
func.func @dense(%x: tensor<45x33xf32>, %w: tensor<33x40xf32>, %b: tensor<40xf32>) -> tensor<45x40xf32> {
  %0 = tess.matmul %x, %w : tensor<45x33xf32>, tensor<33x40xf32> -> tensor<45x40xf32>
  %1 = tess.add %0, %b : tensor<45x40xf32>, tensor<40xf32> -> tensor<45x40xf32>
  %2 = tess.relu %1 : tensor<45x40xf32>
  func.return %2 : tensor<45x40xf32>
}
// CHECK-LABEL: func.func @dense(
// CHECK-DAG:     %[[TWO:.+]] = arith.constant 2 : index
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[T:.+]] = arith.constant 16 : index
// CHECK-NEXT:    "gpu.launch_func"(%[[TWO]], %[[TWO]], %[[ONE]], %[[T]], %[[T]], %[[ONE]], %out0, %x, %w, %b) <{kernel = @kernels::@dense_kernel_0,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// A batched matmul: the batch is the grid's z.
func.func @batched(%a: tensor<2x5x33xf64>, %b: tensor<2x33x6xf64>) -> tensor<2x5x6xf64> {
  %0 = tess.matmul %a, %b : tensor<2x5x33xf64>, tensor<2x33x6xf64> -> tensor<2x5x6xf64>
  func.return %0 : tensor<2x5x6xf64>
}
// CHECK-LABEL: func.func @batched(
// CHECK:         "gpu.launch_func"(%{{.+}}, %{{.+}}, %[[B:.+]], %{{.+}}, %{{.+}}, %{{.+}}, %out0, %a, %b)

// CHECK:       "gpu.module"() <{sym_name = "kernels"}> ({
// CHECK:         "gpu.func"() <{function_type = (memref<45x40xf32>, memref<45x33xf32>, memref<33x40xf32>, memref<40xf32>) -> (), known_block_size = array<i32: 16, 16, 1>, known_grid_size = array<i32: 2, 2, 1>}> ({
// The tiles are workgroup attributions (block-shared), the entry block's last arguments.
// CHECK-NEXT:    ^bb0(%{{.+}}: memref<40xf32>, %[[TA:row_tile]]: memref<32x32xf32, #gpu.address_space<workgroup>>, %[[TB:col_tile]]: memref<32x32xf32, #gpu.address_space<workgroup>>):
// CHECK-NOT:       memref.alloca
// CHECK-DAG:       %[[TX:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-DAG:       %[[TY:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim y>}> : () -> index
// CHECK:           %[[ACC:[0-9a-z_]+]], %{{[0-9a-z_]+}}, %{{[0-9a-z_]+}}, %{{[0-9a-z_]+}} = scf.for %kt = %{{.+}} to %{{.+}} step %{{.+}} iter_args({{.*}}) -> (f32, f32, f32, f32) {
// Four guarded loads of x (the thread's x index along k: x's innermost dim) ...
// CHECK-COUNT-4:     memref.load %x[
// ... into the A tile, then four of w (x index along w's columns) into the B tile.
// CHECK-COUNT-4:     memref.load %w[
// CHECK:             memref.store %{{.+}}, %[[TB]][
// CHECK-NEXT:        "gpu.barrier"() : () -> ()
// CHECK:             %[[N:.+]] = arith.minsi
// CHECK-NEXT:        %{{.+}} = scf.for %kk = %{{.+}} to %[[N]] step %{{.+}} iter_args(%[[A0:.+]] = %{{.+}}, %[[A1:.+]] = %{{.+}}, %[[A2:.+]] = %{{.+}}, %[[A3:.+]] = %{{.+}}) -> (f32, f32, f32, f32) {
// CHECK-NEXT:          %[[L0:.+]] = memref.load %[[TA]][%[[TY]], %kk]
// CHECK-NEXT:          %[[L1:.+]] = memref.load %[[TA]][%{{.+}}, %kk]
// CHECK-NEXT:          %[[R0:.+]] = memref.load %[[TB]][%kk, %[[TX]]]
// CHECK-NEXT:          %[[R1:.+]] = memref.load %[[TB]][%kk, %{{.+}}]
// CHECK-NEXT:          %[[P0:.+]] = arith.mulf %[[L0]], %[[R0]] : f32
// CHECK-NEXT:          %[[S0:.+]] = arith.addf %[[A0]], %[[P0]] : f32
// CHECK-COUNT-3:       arith.mulf
// CHECK:               scf.yield %[[S0]],
// CHECK-NEXT:        }
// CHECK-NEXT:        "gpu.barrier"() : () -> ()
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      }
// Each of the four outputs, in range: stored, then bias and relu on the value just stored.
// CHECK:           scf.if
// CHECK-NEXT:        %[[V:.+]] = arith.addf %{{.+}}, %[[ACC]] : f32
// CHECK-NEXT:        memref.store %[[V]], %out0[
// CHECK-NEXT:        %[[BIAS:.+]] = memref.load %b[
// CHECK-NEXT:        %[[Y:.+]] = arith.addf %[[V]], %[[BIAS]] : f32
// CHECK-NEXT:        %[[R:.+]] = arith.maximumf %[[Y]], %{{.+}} : f32
// CHECK-NEXT:        memref.store %[[R]], %out0[
// CHECK:         sym_name = "dense_kernel_0", gpu.kernel, workgroup_attributions = 2 : i64}
// CHECK:         "gpu.func"() <{function_type = {{.*}}, known_block_size = array<i32: 16, 16, 1>, known_grid_size = array<i32: 1, 1, 2>}> ({

// CHECK:           "gpu.block_id"() <{dimension = #gpu<dim z>}> : () -> index
// CHECK:         sym_name = "batched_kernel_0", gpu.kernel, workgroup_attributions = 2 : i64}
