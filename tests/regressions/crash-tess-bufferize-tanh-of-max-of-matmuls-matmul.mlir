// Issue 10, item 3: tess-bufferize failed with 'no buffer for ... kernel.group' on
// the gradient: tess-fuse-epilogue moved a later group past an earlier group that
// reads its result (uses_any did not look inside groups).
// fuzz: entry=f seed=0 grad=yes
func.func @f(%x: tensor<5x3xf64>, %a: tensor<5x2xf64>, %b: tensor<2x3xf64>, %w: tensor<3x3xf64>) -> tensor<3xf64> {
  %0 = tess.matmul %x, %w : tensor<5x3xf64>, tensor<3x3xf64> -> tensor<5x3xf64>
  %1 = tess.matmul %a, %b : tensor<5x2xf64>, tensor<2x3xf64> -> tensor<5x3xf64>
  %2 = tess.max %0, %1 : tensor<5x3xf64>, tensor<5x3xf64> -> tensor<5x3xf64>
  %3 = tess.matmul %2, %w : tensor<5x3xf64>, tensor<3x3xf64> -> tensor<5x3xf64>
  %4 = tess.tanh %3 : tensor<5x3xf64>
  %5 = tess.mean %4 dims = [0] : tensor<5x3xf64> -> tensor<3xf64>
  func.return %5 : tensor<3xf64>
}
