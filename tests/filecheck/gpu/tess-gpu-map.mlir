// tess-gpu-map: elementwise kernels become grid-stride gpu.funcs, one thread per output
// element, the iteration space flattened in the output's memref order (consecutive
// threads write consecutive addresses); the host launches each with static sizes.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-horizontal,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-map,canonicalize,cse' | filecheck %s

// A broadcast chain over (2,3,5): one kernel, 30 threads (one warp, one block), indices
// split from the linear index with the last dim fastest.
func.func @chain(%x: tensor<2x3x5xf32>, %y: tensor<3x1xf32>) -> tensor<2x3x5xf32> {
  %0 = tess.mul %x, %y : tensor<2x3x5xf32>, tensor<3x1xf32> -> tensor<2x3x5xf32>
  %1 = tess.tanh %0 : tensor<2x3x5xf32>
  func.return %1 : tensor<2x3x5xf32>
}
// CHECK-LABEL: func.func @chain(%x: memref<2x3x5xf32>, %y: memref<3x1xf32>, %out0: memref<2x3x5xf32>)
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[T32:.+]] = arith.constant 32 : index
// CHECK-NEXT:    "gpu.launch_func"(%[[ONE]], %[[ONE]], %[[ONE]], %[[T32]], %[[ONE]], %[[ONE]], %x, %y, %out0) <{kernel = @kernels::@chain_kernel_0,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// A transpose writes coalesced: the thread index walks the OUTPUT's last dim (d0 of the
// loop), so it reads the input with stride.
func.func @transpose(%x: tensor<40x3xf32>) -> tensor<3x40xf32> {
  %0 = tess.permute %x dims = [1, 0] : tensor<40x3xf32> -> tensor<3x40xf32>
  func.return %0 : tensor<3x40xf32>
}
// CHECK-LABEL: func.func @transpose(
// CHECK:         "gpu.launch_func"({{.*}}) <{kernel = @kernels::@transpose_kernel_0,

// 1100 elements: 256 threads a block, 5 blocks.
func.func @big(%x: tensor<1100xf32>) -> tensor<1100xf32> {
  %0 = tess.exp %x : tensor<1100xf32>
  func.return %0 : tensor<1100xf32>
}
// CHECK-LABEL: func.func @big(
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[G:.+]] = arith.constant 5 : index
// CHECK-DAG:     %[[B:.+]] = arith.constant 256 : index
// CHECK-NEXT:    "gpu.launch_func"(%[[G]], %[[ONE]], %[[ONE]], %[[B]], %[[ONE]], %[[ONE]], %x, %out0)

// An optimizer step over three parameters (donated): tess-fuse-horizontal packs them into
// arenas, and ONE launch updates them all.
func.func @sgd(%lr: tensor<f32>, %w0: tensor<4x3xf32> {tess.donated}, %g0: tensor<4x3xf32>, %w1: tensor<7xf32> {tess.donated}, %g1: tensor<7xf32>, %w2: tensor<2x2xf32> {tess.donated}, %g2: tensor<2x2xf32>) -> (tensor<4x3xf32>, tensor<7xf32>, tensor<2x2xf32>) {
  %0 = tess.mul %lr, %g0 : tensor<f32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %1 = tess.sub %w0, %0 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %2 = tess.mul %lr, %g1 : tensor<f32>, tensor<7xf32> -> tensor<7xf32>
  %3 = tess.sub %w1, %2 : tensor<7xf32>, tensor<7xf32> -> tensor<7xf32>
  %4 = tess.mul %lr, %g2 : tensor<f32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %5 = tess.sub %w2, %4 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  func.return %1, %3, %5 : tensor<4x3xf32>, tensor<7xf32>, tensor<2x2xf32>
}
// CHECK-LABEL: func.func @sgd(%lr: memref<f32>, %w_arena: memref<23xf32> {tess.donated}, %g_arena: memref<23xf32>, %out0: memref<23xf32> {tess.aliases_input = 1 : i64})
// CHECK:         "gpu.launch_func"({{.*}}, %w_arena, %lr, %g_arena, %out0) <{kernel = @kernels::@sgd_kernel_0,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// CHECK:       "gpu.module"() <{sym_name = "kernels"}> ({

// CHECK:         "gpu.func"() <{function_type = (memref<2x3x5xf32>, memref<3x1xf32>, memref<2x3x5xf32>) -> (), known_block_size = array<i32: 32, 1, 1>}> ({
// CHECK-NEXT:    ^bb0(%x: memref<2x3x5xf32>, %y: memref<3x1xf32>, %out0: memref<2x3x5xf32>):
// CHECK-DAG:       %[[C30:.+]] = arith.constant 30 : index
// CHECK-DAG:       %[[C5:.+]] = arith.constant 5 : index
// CHECK-DAG:       %[[C3:.+]] = arith.constant 3 : index
// CHECK-DAG:       %[[C0:.+]] = arith.constant 0 : index
// CHECK-DAG:       %[[TX:.+]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-DAG:       %[[BX:.+]] = "gpu.block_id"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-DAG:       %[[BD:.+]] = "gpu.block_dim"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK-DAG:       %[[GD:.+]] = "gpu.grid_dim"() <{dimension = #gpu<dim x>}> : () -> index
// CHECK:           %[[BASE:.+]] = arith.muli %[[BX]], %[[BD]] : index
// CHECK-NEXT:      %[[START:.+]] = arith.addi %[[BASE]], %[[TX]] : index
// CHECK-NEXT:      %[[STRIDE:.+]] = arith.muli %[[BD]], %[[GD]] : index
// CHECK:           scf.for %l = %[[START]] to %[[C30]] step %[[STRIDE]] {
// CHECK-NEXT:        %[[I2:.+]] = arith.remui %l, %[[C5]] : index
// CHECK-NEXT:        %[[R:.+]] = arith.divui %l, %[[C5]] : index
// CHECK-NEXT:        %[[I1:.+]] = arith.remui %[[R]], %[[C3]] : index
// CHECK-NEXT:        %[[I0:.+]] = arith.divui %[[R]], %[[C3]] : index
// CHECK-NEXT:        memref.load %x[%[[I0]], %[[I1]], %[[I2]]] : memref<2x3x5xf32>
// CHECK-NEXT:        memref.load %y[%[[I1]], %[[C0]]] : memref<3x1xf32>
// CHECK-NEXT:        arith.mulf
// CHECK:             math.tanh
// CHECK-NEXT:        memref.store {{.*}}, %out0[%[[I0]], %[[I1]], %[[I2]]] : memref<2x3x5xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      "gpu.return"() : () -> ()
// CHECK-NEXT:    }) {sym_name = "chain_kernel_0", gpu.kernel, tess.grid_stride, tess.unsigned_indices} : () -> ()

// The store's last index is the fastest-varying one (the remainder by 40).
// CHECK:         "gpu.func"() <{function_type = (memref<40x3xf32>, memref<3x40xf32>) -> (), known_block_size = array<i32: 128, 1, 1>}> ({
// CHECK:           scf.for %l =
// CHECK-NEXT:        %[[J:.+]] = arith.remui %l, %{{.+}} : index
// CHECK-NEXT:        %[[I:.+]] = arith.divui %l, %{{.+}} : index
// CHECK-NEXT:        %[[V:.+]] = memref.load %x[%[[J]], %[[I]]] : memref<40x3xf32>
// CHECK-NEXT:        memref.store %[[V]], %out0[%[[I]], %[[J]]] : memref<3x40xf32>

// CHECK:         "gpu.func"() <{function_type = {{.*}}, known_block_size = array<i32: 256, 1, 1>}> ({
// CHECK:         sym_name = "big_kernel_0", gpu.kernel, tess.grid_stride, tess.unsigned_indices}

// The arena update: one 1-D loop over 23 elements; the learning rate a rank-0 load.
// CHECK:         "gpu.func"() <{function_type = (memref<23xf32>, memref<f32>, memref<23xf32>, memref<23xf32>) -> (), known_block_size = {{.*}}}> ({
// CHECK:           scf.for %l =
// CHECK-NEXT:        memref.load %w_arena[%l] : memref<23xf32>
// CHECK-NEXT:        memref.load %lr[] : memref<f32>
// CHECK-NEXT:        memref.load %g_arena[%l] : memref<23xf32>
// CHECK-NEXT:        arith.mulf
// CHECK-NEXT:        arith.subf
// CHECK-NEXT:        memref.store {{.*}}, %out0[%l] : memref<23xf32>
// CHECK:         sym_name = "sgd_kernel_0"
