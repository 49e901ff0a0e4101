// tess-fuse-epilogue: a column sum (a bias gradient) has no outer parallel loop to share,
// but its zero fill, read by nothing else, runs before it in the same kernel: ONE
// kernel.group, not a fill kernel and a sum kernel.
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-fuse-epilogue{report=true}' | filecheck %s

func.func @bias_grad(%d: tensor<32x16xf32>) -> tensor<16xf32> {
  %s = tess.sum %d dims = [0] : tensor<32x16xf32> -> tensor<16xf32>
  func.return %s : tensor<16xf32>
}

// CHECK-LABEL: func.func @bias_grad
// CHECK:         kernel.group -> (tensor<16xf32>) attributes {tess.grouped = ["linalg.fill", "tess.sum"], tess.shared_loops = 0 : i64}
// CHECK:           linalg.generic
// CHECK-SAME:        outs(%{{.*}} : tensor<16xf32>)
// CHECK:           linalg.generic
// CHECK-SAME:        iterator_types = ["reduction", "parallel"]
// CHECK:           kernel.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
