// RUN: python -c "import numpy as np; np.save('%t.x.npy', np.arange(-3, 3, dtype=np.float32).reshape(2, 3)); np.save('%t.b.npy', np.array([0.5, -1.0, 2.0], dtype=np.float32))"
// RUN: tessc-run %s --entry f --inputs %t.x.npy %t.b.npy | filecheck %s
// RUN: tessc-run %s --entry f --inputs %t.x.npy %t.b.npy --pipeline cpu-unfused | filecheck %s
// RUN: tessc-run %s --entry f --inputs %t.x.npy %t.b.npy --pipeline reference | filecheck %s
// RUN: not tessc-run %s --entry f --inputs %t.b.npy %t.x.npy 2>&1 | filecheck %s --check-prefix=SHAPE
// RUN: not tessc-run %s --entry g 2>&1 | filecheck %s --check-prefix=ENTRY

// relu(x + b), its row sums, and the max of the softmax of each row, on fixed inputs.

func.func @f(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2xf32>, tensor<2x1xf32>) {
  %0 = tess.add %x, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = tess.relu %0 : tensor<2x3xf32>
  %2 = tess.sum %1 dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  %m = tess.reduce_max %x dims = [1] keepdim : tensor<2x3xf32> -> tensor<2x1xf32>
  %d = tess.sub %x, %m : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %e = tess.exp %d : tensor<2x3xf32>
  %z = tess.sum %e dims = [1] keepdim : tensor<2x3xf32> -> tensor<2x1xf32>
  %p = tess.div %e, %z : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
  %pm = tess.reduce_max %p dims = [1] keepdim : tensor<2x3xf32> -> tensor<2x1xf32>
  func.return %1, %2, %pm : tensor<2x3xf32>, tensor<2xf32>, tensor<2x1xf32>
}

// x = [[-3, -2, -1], [0, 1, 2]], b = [0.5, -1, 2]
// CHECK:      output 0 (2,3) float32
// CHECK-NEXT: {{\[\[}}0.0000, 0.0000, 1.0000],
// CHECK-NEXT:  [0.5000, 0.0000, 4.0000]]
// CHECK-NEXT: output 1 (2) float32
// CHECK-NEXT: [1.0000, 4.5000]
// CHECK-NEXT: output 2 (2,1) float32
// CHECK-NEXT: {{\[\[}}0.6652],
// CHECK-NEXT:  [0.6652]]

// SHAPE: run.mlir: error: 'f' input 0 ('x') has shape (3), expected (2,3)
// ENTRY: run.mlir: error: no function '@g' to run (the module defines @f)
