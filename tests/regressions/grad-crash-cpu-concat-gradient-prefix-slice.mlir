// Found by `python -m tessc.fuzz programs` (slices and concat added to the generator):
// the gradient of a concat is two slices of the seed; the first, a prefix slice
// (offsets 0, strides 1, 5 -> 3 columns), lowered to a linalg.generic reading the input
// through `d -> d`, so the loops took the input's 5 columns and wrote past the output
// (heap corruption: "free(): invalid next size"; NUMBA_BOUNDSCHECK=1: IndexError).
// fuzz: entry=f seed=15 grad=yes
func.func @f(%a2: tensor<3x3xf64>, %a3: tensor<3x2xf64>) -> tensor<3x5xf64> {
  %v4 = tess.concat %a2, %a3 dim = [1] : tensor<3x3xf64>, tensor<3x2xf64> -> tensor<3x5xf64>
  func.return %v4 : tensor<3x5xf64>
}
