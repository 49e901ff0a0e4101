// Found by `python -m tessc.fuzz programs` (input seed 101000410):
// grad-crash at tess-autodiff: InternalCompilerError: internal compiler error in pass 'tess-autodiff': AssertionError: (TensorType(shape=ArrayAttr(data=(IntAttr(data=2), IntAttr(data=2), IntAttr(data=6), IntAttr(data=4))), element_type=Float64Type(), encoding=NoneAttr()), TensorType(shape=ArrayAttr(data=(IntAttr(data=2), IntAttr(data=2), IntAttr(data=5 (at pipelines.py:227)
// fuzz: entry=f seed=101000410 grad=yes
func.func @f(%a5: tensor<2x2x5x4xf64>, %a6: tensor<2x2x1x3xf64>) -> tensor<2x2x6x1xf64> {
  %v16 = tess.conv %a5, %a6 strides = [1, 2] dilations = [1, 2] padding_low = [0, 1] padding_high = [1, 1] groups = 1 : tensor<2x2x5x4xf64>, tensor<2x2x1x3xf64> -> tensor<2x2x6x1xf64>
  func.return %v16 : tensor<2x2x6x1xf64>
}
