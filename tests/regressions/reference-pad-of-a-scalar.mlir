// Found by `python -m tessc.fuzz programs` (input seed 101000346):
// reference at reference: TypeError: `pad_width` must be of integral type. (at _arraypad_impl.py:789)
// fuzz: entry=f seed=101000346 grad=yes
func.func @f(%v0: tensor<f64>) -> tensor<f64> {
  %v1 = tess.pad %v0 low = [] high = [] value = 0.0 : tensor<f64> -> tensor<f64>
  func.return %v1 : tensor<f64>
}
