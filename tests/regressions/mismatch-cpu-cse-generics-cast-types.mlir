// Found reviewing tess-cse-generics (fuzz2, not by the generator: its casts only read
// arguments): i64 -> f32 -> i64 and i64 -> f64 -> i64 fuse into two generics whose bodies
// are the same ops (sitofp, fptosi) on the same input, different only in the intermediate
// type; xDSL's structural equivalence does not compare result types, so the pass merged
// them and %d returned %b's f32-rounded values (x * (2^24 + 1) is not an f32). Bodies now
// compare their ops' result types too.
// mismatch at cpu: output 1 differs: max abs error 3
// fuzz: entry=f seed=1 grad=no
func.func @f(%x: tensor<6xi64>) -> (tensor<6xi64>, tensor<6xi64>) {
  %k = tess.fill 16777217.0 : tensor<6xi64>
  %y = tess.mul %x, %k : tensor<6xi64>, tensor<6xi64> -> tensor<6xi64>
  %a = tess.cast %y : tensor<6xi64> -> tensor<6xf32>
  %b = tess.cast %a : tensor<6xf32> -> tensor<6xi64>
  %c = tess.cast %y : tensor<6xi64> -> tensor<6xf64>
  %d = tess.cast %c : tensor<6xf64> -> tensor<6xi64>
  func.return %b, %d : tensor<6xi64>, tensor<6xi64>
}
