// tess-outline-kernels: each linalg op of a host moves into its own private function
// @<host>_kernel_<k> with the unit attribute tess.kernel, taking the values it uses
// (deduplicated, in first-use order); the host calls it. Captured constants are cloned.
// RUN: tessc-opt %s -p tess-outline-kernels | filecheck %s

func.func @host(%a: memref<4xf32>, %out0: memref<2x2xf32>, %out1: memref<4xf32>) attributes {tess.num_outputs = 2 : i64} {
  %scale = arith.constant 2.000000e+00 : f32
  %0 = memref.alloc() : memref<4xf32>
  linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a, %a : memref<4xf32>, memref<4xf32>) outs(%0 : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.mulf %p, %scale : f32
    linalg.yield %s : f32
  }
  %1 = memref.expand_shape %0 [[0, 1]] output_shape [2, 2] : memref<4xf32> into memref<2x2xf32>
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%1 : memref<2x2xf32>) outs(%out0 : memref<2x2xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  "memref.copy"(%0, %out1) : (memref<4xf32>, memref<4xf32>) -> ()
  func.return
}
// CHECK-LABEL: func.func @host(%a: memref<4xf32>, %out0: memref<2x2xf32>, %out1: memref<4xf32>) attributes {tess.num_outputs = 2 : i64} {
// CHECK-NEXT:    %scale = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    %[[T:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    func.call @host_kernel_0(%a, %[[T]]) : (memref<4xf32>, memref<4xf32>) -> ()
// CHECK-NEXT:    %[[V:.*]] = memref.expand_shape %[[T]]
// CHECK-NEXT:    func.call @host_kernel_1(%[[V]], %out0) : (memref<2x2xf32>, memref<2x2xf32>) -> ()
// CHECK-NEXT:    "memref.copy"(%[[T]], %out1)
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @host_kernel_0(%a: memref<4xf32>, %[[K0OUT:.*]]: memref<4xf32>) attributes {tess.kernel} {
// CHECK-NEXT:    %scale = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%a, %a : memref<4xf32>, memref<4xf32>) outs(%[[K0OUT]] : memref<4xf32>) {
// CHECK-NEXT:    ^{{.*}}(%x: f32, %y: f32, %o: f32):
// CHECK-NEXT:      %p = arith.mulf %x, %y : f32
// CHECK-NEXT:      %s = arith.mulf %p, %scale : f32
// CHECK-NEXT:      linalg.yield %s : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @host_kernel_1(%[[K1IN:.*]]: memref<2x2xf32>, %out0: memref<2x2xf32>) attributes {tess.kernel} {
// CHECK-NEXT:    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%[[K1IN]] : memref<2x2xf32>) outs(%out0 : memref<2x2xf32>) {
// CHECK:         func.return
// CHECK-NEXT:  }

// Kernel numbering restarts per host; a function without linalg ops is left alone.
func.func @second(%a: memref<f32>, %out0: memref<f32>) {
  linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>], iterator_types = []} ins(%a : memref<f32>) outs(%out0 : memref<f32>) {
  ^bb0(%x: f32, %o: f32):
    %n = arith.negf %x : f32
    linalg.yield %n : f32
  }
  func.return
}
func.func @nothing(%a: memref<f32>) {
  func.return
}
// CHECK-LABEL: func.func @second(%a: memref<f32>, %out0: memref<f32>) {
// CHECK-NEXT:    func.call @second_kernel_0(%a, %out0) : (memref<f32>, memref<f32>) -> ()
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @second_kernel_0(%a: memref<f32>, %out0: memref<f32>) attributes {tess.kernel} {
// CHECK:       func.func @nothing(%a: memref<f32>) {
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }
