// tess-gpu-rows: a row-wise kernel (softmax) is ONE launch: a block per row runs its ops
// in order, elementwise ones with the threads striding over the row, reductions as a
// block tree in workgroup memory, a barrier after each op.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-rows,canonicalize,cse' | filecheck %s

func.func @softmax(%x: tensor<6x33xf32>) -> tensor<6x33xf32> {
  %0 = tess.reduce_max %x dims = [1] keepdim : tensor<6x33xf32> -> tensor<6x1xf32>
  %1 = tess.sub %x, %0 : tensor<6x33xf32>, tensor<6x1xf32> -> tensor<6x33xf32>
  %2 = tess.exp %1 : tensor<6x33xf32>
  %3 = tess.sum %2 dims = [1] keepdim : tensor<6x33xf32> -> tensor<6x1xf32>
  %4 = tess.div %2, %3 : tensor<6x33xf32>, tensor<6x1xf32> -> tensor<6x33xf32>
  func.return %4 : tensor<6x33xf32>
}
// CHECK-LABEL: func.func @softmax(
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[SIX:.+]] = arith.constant 6 : index
// CHECK-DAG:     %[[T:.+]] = arith.constant 64 : index
// CHECK:         "gpu.launch_func"(%[[SIX]], %[[ONE]], %[[ONE]], %[[T]], %[[ONE]], %[[ONE]], {{.*}}) <{kernel = @kernels::@softmax_kernel_0,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// CHECK:       "gpu.func"() <{function_type = {{.*}}, known_block_size = array<i32: 64, 1, 1>}> ({
// CHECK-NEXT:  ^bb0({{.*}}, %[[MAXT:tree]]: memref<64xf32, #gpu.address_space<workgroup>>, %[[SUMT:tree_1]]: memref<64xf32, #gpu.address_space<workgroup>>):
// CHECK-NOT:     memref.alloca
// CHECK:         %[[TX:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK:         scf.for %row =
// The max's fill, then the row max: a strided fold, the tree, lane 0 stores.
// CHECK:           scf.for %e = %[[TX]]
// CHECK:           "gpu.barrier"() : () -> ()
// CHECK-NEXT:      %[[M:.+]] = scf.for %r = %[[TX]] to %{{.+}} step %{{.+}} iter_args
// CHECK:             arith.maximumf
// CHECK:           memref.store %[[M]], %[[MAXT]][%[[TX]]]
// CHECK-COUNT-7:   "gpu.barrier"() : () -> ()
// CHECK:           scf.if
// CHECK:             memref.store {{.*}}, %{{.+}}[%row, %{{.+}}] : memref<6x1xf32>
// CHECK:           "gpu.barrier"() : () -> ()
// exp(x - max) over the row, reading the max this block just stored.
// CHECK-NEXT:      scf.for %{{.+}} = %[[TX]]
// CHECK:             arith.subf
// CHECK-NEXT:        math.exp
// CHECK:           "gpu.barrier"() : () -> ()
// The sum's fill and tree, then the divide.
// CHECK:           memref.store {{.*}}, %[[SUMT]][%[[TX]]]
// CHECK:           arith.divf
// CHECK:           "gpu.barrier"() : () -> ()
// CHECK-NEXT:    }
// CHECK-NEXT:    "gpu.return"() : () -> ()
// CHECK-NEXT:  }) {sym_name = "softmax_kernel_0", gpu.kernel, workgroup_attributions = 2 : i64, tess.grid_stride, tess.unsigned_indices}
