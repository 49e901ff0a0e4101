// tess-gpu-conv: a convolution becomes a direct convolution whose block owns an output
// tile (features x a box of spatial positions): per chunk of input channels the image
// patch the box reads (with its halo) and the weight slice are staged in workgroup
// memory (a barrier after loading, one before the next chunk), each thread accumulates a
// register tile, and the bias + relu epilogue runs on each stored output.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-partition,tess-gpu-conv,canonicalize,cse' | filecheck %s

// relu(conv(x, w, stride (2, 1)) + b): 9 channels (two chunks of 8), a 4 x 8 box read from
// a 9 x 10 patch (2 * (4 - 1) + 3 rows, 8 - 1 + 3 columns); ONE launch, the batch on z.
func.func @conv_bias_relu(%x: tensor<2x9x9x10xf32>, %w: tensor<5x9x3x3xf32>, %b: tensor<5x1x1xf32>) -> tensor<2x5x4x8xf32> {
  %0 = tess.conv %x, %w strides = [2, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x9x9x10xf32>, tensor<5x9x3x3xf32> -> tensor<2x5x4x8xf32>
  %1 = tess.add %0, %b : tensor<2x5x4x8xf32>, tensor<5x1x1xf32> -> tensor<2x5x4x8xf32>
  %2 = tess.relu %1 : tensor<2x5x4x8xf32>
  func.return %2 : tensor<2x5x4x8xf32>
}
// CHECK-LABEL: func.func @conv_bias_relu(
// CHECK-DAG:     %[[ONE:.+]] = arith.constant 1 : index
// CHECK-DAG:     %[[TWO:.+]] = arith.constant 2 : index
// CHECK-DAG:     %[[X:.+]] = arith.constant 16 : index
// CHECK-DAG:     %[[Y:.+]] = arith.constant 5 : index
// CHECK-NEXT:    "gpu.launch_func"(%[[ONE]], %[[ONE]], %[[TWO]], %[[X]], %[[Y]], %[[ONE]], %out0, %x, %w, %b) <{kernel = @kernels::@conv_bias_relu_kernel_0,
// CHECK-NOT:     gpu.launch_func
// CHECK:         func.return

// CHECK:       "gpu.func"() <{function_type = (memref<2x5x4x8xf32>, memref<2x9x9x10xf32>, memref<5x9x3x3xf32>, memref<5x1x1xf32>) -> (), known_block_size = array<i32: 16, 5, 1>, known_grid_size = array<i32: 1, 1, 2>}> ({
// CHECK-NEXT:  ^bb0(%out0: memref<2x5x4x8xf32>, %x: memref<2x9x9x10xf32>, %w: memref<5x9x3x3xf32>, %b: memref<5x1x1xf32>, %patch: memref<8x9x10xf32, #gpu.address_space<workgroup>>, %weights: memref<5x8x3x3xf32, #gpu.address_space<workgroup>>):
// CHECK:         scf.for %bt =
// CHECK:           scf.for %ct = {{.+}} iter_args({{.+}}) -> (f32, f32) {
// CHECK:             scf.for %e =
// CHECK:               memref.load %x[%bt,
// CHECK:               memref.store {{.+}}, %patch[
// CHECK:             scf.for %e_1 =
// CHECK:               memref.load %w[
// CHECK:               memref.store {{.+}}, %weights[
// CHECK:             "gpu.barrier"() : () -> ()
// CHECK:             scf.for %cc = {{.+}} -> (f32, f32) {
// CHECK-NEXT:          scf.for %k0 = {{.+}} -> (f32, f32) {
// CHECK-NEXT:            scf.for %k1 = {{.+}} -> (f32, f32) {
// CHECK-NEXT:              memref.load %weights[%{{.+}}, %cc, %k0, %k1]
// CHECK-COUNT-2:           memref.load %patch[%cc,
// CHECK-NOT:               memref.load %x
// CHECK:                   arith.mulf
// CHECK:             "gpu.barrier"() : () -> ()
// CHECK-NEXT:        scf.yield
// CHECK:           scf.if
// CHECK:             memref.store {{.+}}, %out0[%bt,
// CHECK:             memref.load %b[
// CHECK:             arith.maximumf
// CHECK:             memref.store {{.+}}, %out0[%bt,
// CHECK:       }) {sym_name = "conv_bias_relu_kernel_0", gpu.kernel, workgroup_attributions = 2 : i64} : () -> ()
