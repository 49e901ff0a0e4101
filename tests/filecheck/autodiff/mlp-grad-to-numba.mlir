// The gradient of a 2-layer MLP's softmax cross-entropy loss goes from tess to Numba source
// in one tessc-opt pipeline: tess-autodiff writes @loss_grad, which then fuses, bufferizes
// and lowers to loops like any other function. (tests/test_autodiff.py runs this source.)
// RUN: tessc-opt %s -p 'tess-autodiff{func=loss wrt=1,2,3,4},tess-to-linalg,tess-fuse,tess-bufferize,tess-outline-kernels,tess-linalg-to-loops,canonicalize,cse' -t numba | filecheck %s
// RUN: tessc-opt %s -p 'tess-autodiff{func=loss wrt=1,2,3,4}' | filecheck %s --check-prefix=TESS

func.func @loss(%x: tensor<8x4xf32>, %w1: tensor<4x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x3xf32>, %b2: tensor<3xf32>, %labels: tensor<8x3xf32>) -> tensor<f32> {
  %0 = tess.matmul %x, %w1 : tensor<8x4xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
  %1 = tess.add %0, %b1 : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
  %h = tess.relu %1 : tensor<8x16xf32>
  %2 = tess.matmul %h, %w2 : tensor<8x16xf32>, tensor<16x3xf32> -> tensor<8x3xf32>
  %logits = tess.add %2, %b2 : tensor<8x3xf32>, tensor<3xf32> -> tensor<8x3xf32>
  %m = tess.reduce_max %logits dims = [1] keepdim : tensor<8x3xf32> -> tensor<8x1xf32>
  %shifted = tess.sub %logits, %m : tensor<8x3xf32>, tensor<8x1xf32> -> tensor<8x3xf32>
  %e = tess.exp %shifted : tensor<8x3xf32>
  %z = tess.sum %e dims = [1] keepdim : tensor<8x3xf32> -> tensor<8x1xf32>
  %lz = tess.log %z : tensor<8x1xf32>
  %logp = tess.sub %shifted, %lz : tensor<8x3xf32>, tensor<8x1xf32> -> tensor<8x3xf32>
  %3 = tess.mul %labels, %logp : tensor<8x3xf32>, tensor<8x3xf32> -> tensor<8x3xf32>
  %4 = tess.sum %3 dims = [1] : tensor<8x3xf32> -> tensor<8xf32>
  %5 = tess.mean %4 dims = [0] : tensor<8xf32> -> tensor<f32>
  %loss = tess.neg %5 : tensor<f32>
  func.return %loss : tensor<f32>
}

// CHECK:      TESSC_SIGNATURES = {
// CHECK:        "loss_grad": {
// CHECK-NEXT:     "function": "loss_grad",
// CHECK-NEXT:     "inputs": [((8, 4), "float32"), ((4, 16), "float32"), ((16,), "float32"), ((16, 3), "float32"), ((3,), "float32"), ((8, 3), "float32")],
// CHECK-NEXT:     "input_names": ["x", "w1", "b1", "w2", "b2", "labels"],
// CHECK-NEXT:     "outputs": [((), "float32"), ((4, 16), "float32"), ((16,), "float32"), ((16, 3), "float32"), ((3,), "float32")],
// The forward function's kernels are few ops in all: serial, emitted into its body.
// CHECK:      def loss(x, w1, b1, w2, b2, labels, out0):
// CHECK:        # loss_kernel_0
// CHECK-NOT:  def loss_kernel_
// The gradient's 38 serial kernels hold over 200 ops: each is compiled on its own and
// called by name with pointers (`numba_external`), written as LLVM IR (`to_llvm`: loops
// of phis, a GEP per access over row-major strides); the host passes the buffers'
// addresses, an argument's read once at the top.
// CHECK:      def loss_grad(x, w1, b1, w2, b2, labels, out0, out1, out2, out3, out4):
// CHECK-NEXT:   x_addr = x.ctypes.data
// CHECK-NEXT:   w1_addr = w1.ctypes.data
// CHECK:        [[BUF:buf[0-9]*]] = np.empty((8, 16), dtype=np.float32)
// CHECK-NEXT:   loss_grad_kernel_0([[BUF]].ctypes.data)
// CHECK-NEXT:   loss_grad_kernel_1(x_addr, w1_addr, [[BUF]].ctypes.data)
// CHECK-NOT:    # loss_grad_kernel_
// CHECK:      loss_grad_kernel_0 = llvm_kernel(__name__, 'loss_grad_kernel_0', void(voidptr), (
// CHECK-NEXT: ), '''\
// CHECK-NEXT: define void @loss_grad_kernel_0(ptr %arg0) #0 {
// CHECK-NEXT: entry:
// CHECK-NEXT:   br label %[[LOOP:loop[0-9]+]]
// CHECK-NEXT: [[LOOP]]:
// CHECK-NEXT:   %[[I0:i0\.[0-9]+]] = phi i64 [ 0, %entry ], [ %{{.*}}, %{{.*}} ]
// CHECK-NEXT:   %[[TEST:v[0-9]+]] = icmp slt i64 %[[I0]], 8
// CHECK:        %[[ROW:v[0-9]+]] = mul nsw i64 %[[I0]], 16
// CHECK-NEXT:   %[[AT:v[0-9]+]] = add nsw i64 %[[ROW]], %{{i1\.[0-9]+}}
// CHECK-NEXT:   %[[PTR:v[0-9]+]] = getelementptr inbounds float, ptr %arg0, i64 %[[AT]]
// CHECK-NEXT:   store float 0x0000000000000000, ptr %[[PTR]], align 4
// CHECK:        ret void
// CHECK:      loss_grad_kernel_1 = llvm_kernel(__name__, 'loss_grad_kernel_1', void(voidptr, voidptr, voidptr), (
// CHECK:      define void @loss_grad_kernel_1(ptr %x, ptr %w1, ptr %arg2) #0 {
// CHECK-NOT:  @external(

// At the tess level: the gradient of each weight is a matmul with a transposed activation.
// TESS-LABEL: func.func @loss_grad(
// TESS:         %[[HT:.*]] = tess.permute %h dims = [1, 0] : tensor<8x16xf32> -> tensor<16x8xf32>
// TESS-NEXT:    %{{.*}} = tess.matmul %[[HT]], %{{.*}} : tensor<16x8xf32>, tensor<8x3xf32> -> tensor<16x3xf32>
// TESS:         %[[XT:.*]] = tess.permute %x dims = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
// TESS-NEXT:    %{{.*}} = tess.matmul %[[XT]], %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
