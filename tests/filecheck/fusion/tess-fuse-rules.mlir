// tess-fuse edge cases on hand-written linalg: a producer that reads its init, a
// multi-result producer of which one result is used, a reshape view between two generics,
// and an expensive producer whose other use comes before the consumer.
// RUN: tessc-opt %s -p 'tess-fuse{report=true}' | filecheck %s

// The producer accumulates into %y (its body reads its init), so %y becomes an input of
// the fused generic.
// CHECK-LABEL: func.func @reads_init
// CHECK:         linalg.generic {{.*}} ins(%x, %y, %z : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    ^bb0(%[[X:[^:]+]]: f32, %[[Y:[^:]+]]: f32, %[[Z:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT:      %[[S:[^ ]+]] = arith.addf %[[Y]], %[[X]] : f32
// CHECK-NEXT:      %[[M:[^ ]+]] = arith.mulf %[[S]], %[[Z]] : f32
// CHECK-NEXT:      linalg.yield %[[M]] : f32
// CHECK-NOT:     linalg.generic
func.func @reads_init(%x: tensor<4xf32>, %y: tensor<4xf32>, %z: tensor<4xf32>) -> tensor<4xf32> {
  %acc = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%y : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %o, %a : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%acc, %z : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// Only the used result's computation survives in the fused body: no exp.
// CHECK-LABEL: func.func @two_results_one_used
// CHECK:         linalg.generic {{.*}} ins(%x : tensor<4xf32>)
// CHECK-NEXT:    ^bb0
// CHECK-NEXT:      = arith.negf
// CHECK-NEXT:      = arith.mulf
// CHECK-NEXT:      linalg.yield
// CHECK-NOT:     linalg.generic
func.func @two_results_one_used(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e0 = tensor.empty() : tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %p:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e0, %e1 : tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: f32, %o0: f32, %o1: f32):
    %ex = math.exp %a : f32
    %n = arith.negf %a : f32
    linalg.yield %ex, %n : f32, f32
  } -> (tensor<4xf32>, tensor<4xf32>)
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%p#1 : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  func.return %r : tensor<4xf32>
}

// Fusion stops at a reshape view, and says so.
// CHECK-LABEL: func.func @view_boundary
// CHECK:         %n = linalg.generic
// CHECK:         tensor.collapse_shape %n
// CHECK:         %r = linalg.generic {{.*}}tess.fusion_refused = "operand 0 (tensor.collapse_shape): tensor.collapse_shape is a view, not a linalg.generic; fusion stops at reshapes"
func.func @view_boundary(%x: tensor<2x3xf32>) -> tensor<6xf32> {
  %e0 = tensor.empty() : tensor<2x3xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<2x3xf32>) outs(%e0 : tensor<2x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.negf %a : f32
    linalg.yield %m : f32
  } -> tensor<2x3xf32>
  %v = tensor.collapse_shape %n [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
  %e1 = tensor.empty() : tensor<6xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%v : tensor<6xf32>) outs(%e1 : tensor<6xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.absf %a : f32
    linalg.yield %m : f32
  } -> tensor<6xf32>
  func.return %r : tensor<6xf32>
}

// exp has a second use (the view) before the consumer: no multi-output, no duplication.
// CHECK-LABEL: func.func @use_before_consumer
// CHECK:         %ex = linalg.generic
// CHECK:           math.exp
// CHECK:         %r = linalg.generic {{.*}}tess.fusion_refused = "operand 0 (math.exp): producer has 2 uses and is expensive; another use precedes the consumer; operand 1
// CHECK-NOT:       = math.exp
func.func @use_before_consumer(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e0 = tensor.empty() : tensor<4xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%x : tensor<4xf32>) outs(%e0 : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = math.exp %a : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  %v = tensor.collapse_shape %ex [[0]] : tensor<4xf32> into tensor<4xf32>
  %e1 = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%ex, %v : tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  func.return %r, %v : tensor<4xf32>, tensor<4xf32>
}
