// tess-bufferize: tensors to memrefs in destination-passing style. Results become trailing
// out-params (`tess.num_outputs`), intermediates memref.alloc, reshapes memref views, and
// the op that makes a result's buffer makes it in the out-param: a copy only for a result
// that is an argument, a view, or returned twice.
// RUN: tessc-opt %s -p tess-to-linalg,tess-bufferize | filecheck %s

func.func @chain(%a: tensor<3x1xf32>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %0 = tess.add %a, %b : tensor<3x1xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %1 = tess.exp %0 : tensor<3x4xf32>
  func.return %1 : tensor<3x4xf32>
}
// CHECK-LABEL: func.func @chain(%a: memref<3x1xf32>, %b: memref<4xf32>, %out0: memref<3x4xf32>) attributes {tess.num_outputs = 1 : i64} {
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() : memref<3x4xf32>
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : memref<3x1xf32>, memref<4xf32>) outs(%[[T]] : memref<3x4xf32>) attrs = {tess.op = "tess.add"} {
// CHECK:         }
// CHECK-NEXT:    linalg.generic {{.*}} ins(%[[T]] : memref<3x4xf32>) outs(%out0 : memref<3x4xf32>) attrs = {tess.op = "tess.exp"} {
// CHECK:         }
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }

// The init and the accumulation of a reduction both write the out-param.
func.func @reduce(%a: tensor<2x3xf32>) -> tensor<2x1xf32> {
  %0 = tess.sum %a dims = [1] keepdim : tensor<2x3xf32> -> tensor<2x1xf32>
  func.return %0 : tensor<2x1xf32>
}
// CHECK-LABEL: func.func @reduce(%a: memref<2x3xf32>, %out0: memref<2x1xf32>) attributes {tess.num_outputs = 1 : i64} {
// CHECK-NEXT:    linalg.generic {{.*}} outs(%out0 : memref<2x1xf32>) {
// CHECK:         linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>], iterator_types = ["parallel", "reduction"]} ins(%a : memref<2x3xf32>) outs(%out0 : memref<2x1xf32>) attrs = {tess.op = "tess.sum"} {
// CHECK:         func.return

// An argument result and a second return of a value are copied; so is a view of a result.
func.func @aliasing(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<6xf32>) {
  %0 = tess.exp %a : tensor<2x3xf32>
  %1 = tess.reshape %0 : tensor<2x3xf32> -> tensor<6xf32>
  func.return %a, %0, %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<6xf32>
}
// CHECK-LABEL: func.func @aliasing(%a: memref<2x3xf32>, %out0: memref<2x3xf32>, %out1: memref<2x3xf32>, %out2: memref<2x3xf32>, %out3: memref<6xf32>) attributes {tess.num_outputs = 4 : i64} {
// CHECK-NEXT:    linalg.generic {{.*}} ins(%a : memref<2x3xf32>) outs(%out1 : memref<2x3xf32>) attrs = {tess.op = "tess.exp"} {
// CHECK:         }
// CHECK-NEXT:    %[[FLAT:.*]] = memref.collapse_shape %out1 {{\[}}[0 : i64, 1 : i64]] : memref<2x3xf32> into memref<6xf32>
// CHECK-NEXT:    "memref.copy"(%a, %out0) : (memref<2x3xf32>, memref<2x3xf32>) -> ()
// CHECK-NEXT:    "memref.copy"(%out1, %out2) : (memref<2x3xf32>, memref<2x3xf32>) -> ()
// CHECK-NEXT:    "memref.copy"(%[[FLAT]], %out3) : (memref<6xf32>, memref<6xf32>) -> ()
// CHECK-NEXT:    func.return

// Calls pass out-params too; the last call writes the caller's out-param. Declarations get
// the same signature.
func.func @calls(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = func.call @chain2(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = func.call @chain2(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  func.return %1 : tensor<2x3xf32>
}
func.func private @chain2(%a: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-LABEL: func.func @calls(%a: memref<2x3xf32>, %out0: memref<2x3xf32>) attributes {tess.num_outputs = 1 : i64} {
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK-NEXT:    func.call @chain2(%a, %[[T]]) : (memref<2x3xf32>, memref<2x3xf32>) -> ()
// CHECK-NEXT:    func.call @chain2(%[[T]], %out0) : (memref<2x3xf32>, memref<2x3xf32>) -> ()
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @chain2(memref<2x3xf32>, memref<2x3xf32>) -> () attributes {tess.num_outputs = 1 : i64}

// Already at the linalg level: a tensor.empty shared by two generics (as after cse) gives
// each its own buffer; a generic whose outs value is also read elsewhere writes a copy.
func.func @shared_empty(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %0 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%0 : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.addf %x, %x : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  %2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%1 : tensor<4xf32>) outs(%0 : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.addf %x, %o : f32
    linalg.yield %n : f32
  } -> tensor<4xf32>
  func.return %2, %1 : tensor<4xf32>, tensor<4xf32>
}
// CHECK-LABEL: func.func @shared_empty(%a: memref<4xf32>, %out0: memref<4xf32>, %out1: memref<4xf32>) attributes {tess.num_outputs = 2 : i64} {
// CHECK-NEXT:    %[[NEG:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    linalg.generic {{.*}} ins(%a : memref<4xf32>) outs(%[[NEG]] : memref<4xf32>) {
// CHECK:         linalg.generic {{.*}} ins(%[[NEG]] : memref<4xf32>) outs(%out1 : memref<4xf32>) {
// CHECK:         "memref.copy"(%[[NEG]], %out0) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    linalg.generic {{.*}} ins(%out1 : memref<4xf32>) outs(%out0 : memref<4xf32>) {
// CHECK:         func.return
// CHECK-NOT:     tensor
