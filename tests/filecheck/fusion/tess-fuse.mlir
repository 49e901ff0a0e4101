// tess-fuse on the linalg-on-tensors IR that tess-to-linalg produces (one generic per tess
// op, written here by hand in that form): vertical fusion, the rules that refuse it, and the
// report attributes.
// RUN: tessc-opt %s -p tess-fuse | filecheck %s
// RUN: tessc-opt %s -p 'tess-fuse{report=true}' | filecheck %s --check-prefix=REPORT
// RUN: tessc-opt %s -p tess-fuse | filecheck %s --check-prefix=QUIET

// Without `report`, the pass leaves no attributes of its own.
// QUIET: builtin.module
// QUIET-NOT: tess.fused
// QUIET-NOT: tess.fusion_refused
// QUIET-NOT: tess.kind

// A chain of zips and a map with broadcasting (w: (4), b: (3,1)) is one generic; the
// broadcast maps survive the composition.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:    %{{.*}} = tensor.empty() : tensor<3x4xf32>
// CHECK-NEXT:    %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %w, %b : tensor<3x4xf32>, tensor<4xf32>, tensor<3x1xf32>)
// CHECK:           arith.mulf
// CHECK-NEXT:      arith.addf
// CHECK-NEXT:      arith.constant
// CHECK-NEXT:      arith.maximumf
// CHECK-NEXT:      linalg.yield
// CHECK-NEXT:    } -> tensor<3x4xf32>
// CHECK-NEXT:    func.return %r
// REPORT-LABEL: func.func @chain
// REPORT:        tess.fused = ["tess.mul", "tess.add", "tess.relu"], tess.kind = "broadcast"
func.func @chain(%x: tensor<3x4xf32>, %w: tensor<4xf32>, %b: tensor<3x1xf32>) -> tensor<3x4xf32> {
  %0 = tensor.empty() : tensor<3x4xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x, %w : tensor<3x4xf32>, tensor<4xf32>) outs(%0 : tensor<3x4xf32>) attrs =  {tess.op = "tess.mul"} {
  ^bb0(%1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %1, %2 : f32
    linalg.yield %4 : f32
  } -> tensor<3x4xf32>
  %5 = tensor.empty() : tensor<3x4xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%m, %b : tensor<3x4xf32>, tensor<3x1xf32>) outs(%5 : tensor<3x4xf32>) attrs =  {tess.op = "tess.add"} {
  ^bb0(%6: f32, %7: f32, %8: f32):
    %9 = arith.addf %6, %7 : f32
    linalg.yield %9 : f32
  } -> tensor<3x4xf32>
  %10 = tensor.empty() : tensor<3x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<3x4xf32>) outs(%10 : tensor<3x4xf32>) attrs =  {tess.op = "tess.relu"} {
  ^bb0(%11: f32, %12: f32):
    %13 = arith.constant 0.000000e+00 : f32
    %14 = arith.maximumf %11, %13 : f32
    linalg.yield %14 : f32
  } -> tensor<3x4xf32>
  func.return %r : tensor<3x4xf32>
}

// The seed: (3,5,1) * (1,5,4), then sum over dim 1. One generic computes the (3,4) result
// directly; the (3,5,4) intermediate exists nowhere. The reduction's init stays as it is.
// CHECK-LABEL: func.func @seed(
// CHECK-NOT:     tensor<3x5x4xf32>
// CHECK:         %[[INIT:.+]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<3x4xf32>)
// CHECK-NEXT:    ^bb0(%{{.*}}: f32):
// CHECK-NEXT:      arith.constant 0.0
// CHECK-NOT:     tensor<3x5x4xf32>
// CHECK:         %s = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32>) outs(%[[INIT]] : tensor<3x4xf32>)
// CHECK-NEXT:    ^bb0(%[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32, %[[ACC:[^:]+]]: f32):
// CHECK-NEXT:      %[[P:[^ ]+]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[S:[^ ]+]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK-NOT:     tensor<3x5x4xf32>
// CHECK:         func.return %s
// REPORT-LABEL: func.func @seed(
// REPORT:        tess.fused = ["tess.mul", "tess.sum"], tess.kind = "matmul"
func.func @seed(%a: tensor<3x5x1xf32>, %b: tensor<1x5x4xf32>) -> tensor<3x4xf32> {
  %0 = tensor.empty() : tensor<3x5x4xf32>
  %z = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32>) outs(%0 : tensor<3x5x4xf32>) attrs =  {tess.op = "tess.mul"} {
  ^bb0(%1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %1, %2 : f32
    linalg.yield %4 : f32
  } -> tensor<3x5x4xf32>
  %5 = tensor.empty() : tensor<3x4xf32>
  %6 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%5 : tensor<3x4xf32>) {
  ^bb0(%7: f32):
    %8 = arith.constant 0.000000e+00 : f32
    linalg.yield %8 : f32
  } -> tensor<3x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%z : tensor<3x5x4xf32>) outs(%6 : tensor<3x4xf32>) attrs =  {tess.op = "tess.sum"} {
  ^bb0(%9: f32, %10: f32):
    %11 = arith.addf %10, %9 : f32
    linalg.yield %11 : f32
  } -> tensor<3x4xf32>
  func.return %s : tensor<3x4xf32>
}

// The same with keepdim: the (3,1,4) result is written through (d0, 0, d2).
// CHECK-LABEL: func.func @seed_keepdim
// CHECK-NOT:     tensor<3x5x4xf32>
// CHECK:         %s = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, 0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32>)
// CHECK-NOT:     tensor<3x5x4xf32>
// CHECK:         func.return %s
func.func @seed_keepdim(%a: tensor<3x5x1xf32>, %b: tensor<1x5x4xf32>) -> tensor<3x1x4xf32> {
  %0 = tensor.empty() : tensor<3x5x4xf32>
  %z = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, 0)>, affine_map<(d0, d1, d2) -> (0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%a, %b : tensor<3x5x1xf32>, tensor<1x5x4xf32>) outs(%0 : tensor<3x5x4xf32>) attrs =  {tess.op = "tess.mul"} {
  ^bb0(%1: f32, %2: f32, %3: f32):
    %4 = arith.mulf %1, %2 : f32
    linalg.yield %4 : f32
  } -> tensor<3x5x4xf32>
  %5 = tensor.empty() : tensor<3x1x4xf32>
  %6 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} outs(%5 : tensor<3x1x4xf32>) {
  ^bb0(%7: f32):
    %8 = arith.constant 0.000000e+00 : f32
    linalg.yield %8 : f32
  } -> tensor<3x1x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, 0, d2)>], iterator_types = ["parallel", "reduction", "parallel"]} ins(%z : tensor<3x5x4xf32>) outs(%6 : tensor<3x1x4xf32>) attrs =  {tess.op = "tess.sum"} {
  ^bb0(%9: f32, %10: f32):
    %11 = arith.addf %10, %9 : f32
    linalg.yield %11 : f32
  } -> tensor<3x1x4xf32>
  func.return %s : tensor<3x1x4xf32>
}

// An expensive producer (exp) with two reducing consumers is computed once, not fused
// into both: multi-output fusion needs an all-parallel consumer.
// CHECK-LABEL: func.func @two_reductions
// CHECK:         %e = linalg.generic
// CHECK:           math.exp
// CHECK:         %r = linalg.generic {{.*}} ins(%e : tensor<3x4xf32>)
// CHECK-NOT:       math.exp
// CHECK:         %c = linalg.generic {{.*}} ins(%e : tensor<3x4xf32>)
// CHECK-NOT:       math.exp
// CHECK:         func.return %r, %c
// REPORT-LABEL: func.func @two_reductions
// REPORT:        %r = linalg.generic {{.*}}tess.fusion_refused = "operand 0 (tess.exp): producer has 2 uses and is expensive; multi-output fusion needs an all-parallel consumer"
// REPORT:        %c = linalg.generic {{.*}}tess.fusion_refused = "operand 0 (tess.exp): producer has 2 uses and is expensive; multi-output fusion needs an all-parallel consumer"
func.func @two_reductions(%x: tensor<3x4xf32>) -> (tensor<3xf32>, tensor<4xf32>) {
  %0 = tensor.empty() : tensor<3x4xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<3x4xf32>) outs(%0 : tensor<3x4xf32>) attrs =  {tess.op = "tess.exp"} {
  ^bb0(%1: f32, %2: f32):
    %3 = math.exp %1 : f32
    linalg.yield %3 : f32
  } -> tensor<3x4xf32>
  %4 = tensor.empty() : tensor<3xf32>
  %5 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%4 : tensor<3xf32>) {
  ^bb0(%6: f32):
    %7 = arith.constant 0.000000e+00 : f32
    linalg.yield %7 : f32
  } -> tensor<3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%e : tensor<3x4xf32>) outs(%5 : tensor<3xf32>) attrs =  {tess.op = "tess.sum"} {
  ^bb0(%8: f32, %9: f32):
    %10 = arith.addf %9, %8 : f32
    linalg.yield %10 : f32
  } -> tensor<3xf32>
  %11 = tensor.empty() : tensor<4xf32>
  %12 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%11 : tensor<4xf32>) {
  ^bb0(%13: f32):
    %14 = arith.constant 0.000000e+00 : f32
    linalg.yield %14 : f32
  } -> tensor<4xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%e : tensor<3x4xf32>) outs(%12 : tensor<4xf32>) attrs =  {tess.op = "tess.sum"} {
  ^bb0(%15: f32, %16: f32):
    %17 = arith.addf %16, %15 : f32
    linalg.yield %17 : f32
  } -> tensor<4xf32>
  func.return %r, %c : tensor<3xf32>, tensor<4xf32>
}

// A forward value and a saved activation: one generic with two results, so sigmoid is
// computed once and nothing is read twice.
// CHECK-LABEL: func.func @saved_activation
// CHECK:         %[[OUT0:[^ ]+]] = tensor.empty() : tensor<3x4xf32>
// CHECK-NEXT:    %[[OUT1:[^ ]+]] = tensor.empty() : tensor<3x4xf32>
// CHECK-NEXT:    %[[S:[^ ,]+]], %[[E:[^ ,]+]] = linalg.generic {{.*}} ins(%x, %y : tensor<3x4xf32>, tensor<3x4xf32>) outs(%[[OUT1]], %[[OUT0]] : tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK:           math.exp
// CHECK:           %[[SIG:[^ ]+]] = arith.divf
// CHECK-NEXT:      %[[PROD:[^ ]+]] = arith.mulf %[[SIG]],
// CHECK-NEXT:      linalg.yield %[[PROD]], %[[SIG]] : f32, f32
// CHECK-NEXT:    } -> (tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK-NEXT:    func.return %[[S]], %[[E]]
// REPORT-LABEL: func.func @saved_activation
// REPORT:        tess.fused = ["tess.sigmoid", "tess.mul"], tess.kind = "elementwise"
func.func @saved_activation(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>) {
  %0 = tensor.empty() : tensor<3x4xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<3x4xf32>) outs(%0 : tensor<3x4xf32>) attrs =  {tess.op = "tess.sigmoid"} {
  ^bb0(%1: f32, %2: f32):
    %3 = arith.constant 1.000000e+00 : f32
    %4 = arith.negf %1 : f32
    %5 = math.exp %4 : f32
    %6 = arith.addf %3, %5 : f32
    %7 = arith.divf %3, %6 : f32
    linalg.yield %7 : f32
  } -> tensor<3x4xf32>
  %8 = tensor.empty() : tensor<3x4xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%e, %y : tensor<3x4xf32>, tensor<3x4xf32>) outs(%8 : tensor<3x4xf32>) attrs =  {tess.op = "tess.mul"} {
  ^bb0(%9: f32, %10: f32, %11: f32):
    %12 = arith.mulf %9, %10 : f32
    linalg.yield %12 : f32
  } -> tensor<3x4xf32>
  func.return %s, %e : tensor<3x4xf32>, tensor<3x4xf32>
}

// The prologue (neg) would be recomputed 4 times per element inside the contraction, and
// the epilogue (bias add, relu) must run after the reduction: both refused. The epilogue
// itself is one generic.
// CHECK-LABEL: func.func @matmul_bias_relu
// CHECK:         %n = linalg.generic
// CHECK:           arith.negf
// CHECK:         %m = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%n, %w
// CHECK-NOT:       arith.negf
// CHECK:         %r = linalg.generic {{.*}} ins(%m, %b : tensor<2x4xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      arith.addf
// CHECK-NEXT:      arith.constant
// CHECK-NEXT:      arith.maximumf
// REPORT-LABEL: func.func @matmul_bias_relu
// REPORT:        %m = linalg.generic {{.*}}tess.kind = "matmul", tess.fusion_refused = "operand 0 (tess.neg): would recompute the producer 4 times per element inside a reduction"
// REPORT:        %r = linalg.generic {{.*}}tess.fused = ["tess.add", "tess.relu"], tess.kind = "broadcast", tess.fusion_refused = "operand 0 (tess.matmul): producer is a matmul: its epilogue must run after the reduction finishes, which one linalg.generic cannot express (tess-fuse-epilogue groups them)"
func.func @matmul_bias_relu(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>) -> tensor<2x4xf32> {
  %0 = tensor.empty() : tensor<2x3xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x3xf32>) outs(%0 : tensor<2x3xf32>) attrs =  {tess.op = "tess.neg"} {
  ^bb0(%1: f32, %2: f32):
    %3 = arith.negf %1 : f32
    linalg.yield %3 : f32
  } -> tensor<2x3xf32>
  %4 = tensor.empty() : tensor<2x4xf32>
  %5 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%4 : tensor<2x4xf32>) {
  ^bb0(%6: f32):
    %7 = arith.constant 0.000000e+00 : f32
    linalg.yield %7 : f32
  } -> tensor<2x4xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%n, %w : tensor<2x3xf32>, tensor<3x4xf32>) outs(%5 : tensor<2x4xf32>) attrs =  {tess.op = "tess.matmul"} {
  ^bb0(%8: f32, %9: f32, %10: f32):
    %11 = arith.mulf %8, %9 : f32
    %12 = arith.addf %10, %11 : f32
    linalg.yield %12 : f32
  } -> tensor<2x4xf32>
  %13 = tensor.empty() : tensor<2x4xf32>
  %a = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%m, %b : tensor<2x4xf32>, tensor<4xf32>) outs(%13 : tensor<2x4xf32>) attrs =  {tess.op = "tess.add"} {
  ^bb0(%14: f32, %15: f32, %16: f32):
    %17 = arith.addf %14, %15 : f32
    linalg.yield %17 : f32
  } -> tensor<2x4xf32>
  %18 = tensor.empty() : tensor<2x4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<2x4xf32>) outs(%18 : tensor<2x4xf32>) attrs =  {tess.op = "tess.relu"} {
  ^bb0(%19: f32, %20: f32):
    %21 = arith.constant 0.000000e+00 : f32
    %22 = arith.maximumf %19, %21 : f32
    linalg.yield %22 : f32
  } -> tensor<2x4xf32>
  func.return %r : tensor<2x4xf32>
}

// Both ways of writing a lerp end as one generic reading a, b and w once each.
// a + (b - a) * w:
// CHECK-LABEL: func.func @lerp_sub
// CHECK:         linalg.generic {{.*}} ins(%a, %b, %w : tensor<4x3xf32>, tensor<4x3xf32>, tensor<3xf32>)
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
func.func @lerp_sub(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>, %w: tensor<3xf32>) -> tensor<4x3xf32> {
  %0 = tensor.empty() : tensor<4x3xf32>
  %d = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%b, %a : tensor<4x3xf32>, tensor<4x3xf32>) outs(%0 : tensor<4x3xf32>) attrs =  {tess.op = "tess.sub"} {
  ^bb0(%1: f32, %2: f32, %3: f32):
    %4 = arith.subf %1, %2 : f32
    linalg.yield %4 : f32
  } -> tensor<4x3xf32>
  %5 = tensor.empty() : tensor<4x3xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%d, %w : tensor<4x3xf32>, tensor<3xf32>) outs(%5 : tensor<4x3xf32>) attrs =  {tess.op = "tess.mul"} {
  ^bb0(%6: f32, %7: f32, %8: f32):
    %9 = arith.mulf %6, %7 : f32
    linalg.yield %9 : f32
  } -> tensor<4x3xf32>
  %10 = tensor.empty() : tensor<4x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %m : tensor<4x3xf32>, tensor<4x3xf32>) outs(%10 : tensor<4x3xf32>) attrs =  {tess.op = "tess.add"} {
  ^bb0(%11: f32, %12: f32, %13: f32):
    %14 = arith.addf %11, %12 : f32
    linalg.yield %14 : f32
  } -> tensor<4x3xf32>
  func.return %r : tensor<4x3xf32>
}

// a * (1 - w) + b * w (the 1 is a fill generic, inlined as a constant):
// CHECK-LABEL: func.func @lerp_one_minus
// CHECK:         linalg.generic {{.*}} ins(%a, %w, %b : tensor<4x3xf32>, tensor<3xf32>, tensor<4x3xf32>)
// CHECK:           arith.constant 1.0
// CHECK-NOT:     linalg.generic
// CHECK:         func.return
// REPORT-LABEL: func.func @lerp_one_minus
// REPORT:        tess.fused = ["tess.fill", "tess.sub", "tess.mul", "tess.mul", "tess.add"]
func.func @lerp_one_minus(%a: tensor<4x3xf32>, %b: tensor<4x3xf32>, %w: tensor<3xf32>) -> tensor<4x3xf32> {
  %0 = tensor.empty() : tensor<3xf32>
  %one = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%0 : tensor<3xf32>) attrs =  {tess.op = "tess.fill"} {
  ^bb0(%1: f32):
    %2 = arith.constant 1.000000e+00 : f32
    linalg.yield %2 : f32
  } -> tensor<3xf32>
  %3 = tensor.empty() : tensor<3xf32>
  %v = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%one, %w : tensor<3xf32>, tensor<3xf32>) outs(%3 : tensor<3xf32>) attrs =  {tess.op = "tess.sub"} {
  ^bb0(%4: f32, %5: f32, %6: f32):
    %7 = arith.subf %4, %5 : f32
    linalg.yield %7 : f32
  } -> tensor<3xf32>
  %8 = tensor.empty() : tensor<4x3xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %v : tensor<4x3xf32>, tensor<3xf32>) outs(%8 : tensor<4x3xf32>) attrs =  {tess.op = "tess.mul"} {
  ^bb0(%9: f32, %10: f32, %11: f32):
    %12 = arith.mulf %9, %10 : f32
    linalg.yield %12 : f32
  } -> tensor<4x3xf32>
  %13 = tensor.empty() : tensor<4x3xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%b, %w : tensor<4x3xf32>, tensor<3xf32>) outs(%13 : tensor<4x3xf32>) attrs =  {tess.op = "tess.mul"} {
  ^bb0(%14: f32, %15: f32, %16: f32):
    %17 = arith.mulf %14, %15 : f32
    linalg.yield %17 : f32
  } -> tensor<4x3xf32>
  %18 = tensor.empty() : tensor<4x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%p, %q : tensor<4x3xf32>, tensor<4x3xf32>) outs(%18 : tensor<4x3xf32>) attrs =  {tess.op = "tess.add"} {
  ^bb0(%19: f32, %20: f32, %21: f32):
    %22 = arith.addf %19, %20 : f32
    linalg.yield %22 : f32
  } -> tensor<4x3xf32>
  func.return %r : tensor<4x3xf32>
}
