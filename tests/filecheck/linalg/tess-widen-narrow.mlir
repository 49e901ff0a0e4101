// tess-widen-narrow: a bf16/f16 (or i16) tensor is storage; each op reading one reads it
// through a cast to f32 (i32), computes there, and casts its result back (round to nearest
// even), so matmuls and reductions accumulate in f32. Casts and bitcasts are left alone, a
// cast between a 16-bit type and anything but its wide type goes through it.
// RUN: tessc-opt %s -p tess-widen-narrow | filecheck %s
// RUN: tessc-opt %s -p tess-widen-narrow,tess-to-linalg | filecheck %s --check-prefix=LINALG

func.func @matmul_sum(%x: tensor<4x3xbf16>, %w: tensor<3x5xbf16>) -> tensor<5xbf16> {
  %0 = tess.matmul %x, %w : tensor<4x3xbf16>, tensor<3x5xbf16> -> tensor<4x5xbf16>
  %1 = tess.sum %0 dims = [0] : tensor<4x5xbf16> -> tensor<5xbf16>
  func.return %1 : tensor<5xbf16>
}
// CHECK-LABEL: func.func @matmul_sum(%x: tensor<4x3xbf16>, %w: tensor<3x5xbf16>) -> tensor<5xbf16> {
// CHECK-NEXT:    %[[X:.*]] = tess.cast %x : tensor<4x3xbf16> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[W:.*]] = tess.cast %w : tensor<3x5xbf16> -> tensor<3x5xf32>
// CHECK-NEXT:    %[[M:.*]] = tess.matmul %[[X]], %[[W]] : tensor<4x3xf32>, tensor<3x5xf32> -> tensor<4x5xf32>
// CHECK-NEXT:    %[[MB:.*]] = tess.cast %[[M]] : tensor<4x5xf32> -> tensor<4x5xbf16>
// CHECK-NEXT:    %[[MW:.*]] = tess.cast %[[MB]] : tensor<4x5xbf16> -> tensor<4x5xf32>
// CHECK-NEXT:    %[[S:.*]] = tess.sum %[[MW]] dims = [0] : tensor<4x5xf32> -> tensor<5xf32>
// CHECK-NEXT:    %[[R:.*]] = tess.cast %[[S]] : tensor<5xf32> -> tensor<5xbf16>
// CHECK-NEXT:    func.return %[[R]] : tensor<5xbf16>

// A comparison reads f16 as f32 and keeps its i1 result; an i16 add computes in i32.
func.func @mixed(%a: tensor<3xf16>, %b: tensor<3xf16>, %i: tensor<3xi16>) -> (tensor<3xi1>, tensor<3xi16>) {
  %0 = tess.lt %a, %b : tensor<3xf16>, tensor<3xf16> -> tensor<3xi1>
  %1 = tess.add %i, %i : tensor<3xi16>, tensor<3xi16> -> tensor<3xi16>
  func.return %0, %1 : tensor<3xi1>, tensor<3xi16>
}
// CHECK-LABEL: func.func @mixed(
// CHECK:         tess.lt %{{.*}}, %{{.*}} : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
// CHECK:         tess.add %{{.*}}, %{{.*}} : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
// CHECK-NEXT:    tess.cast %{{.*}} : tensor<3xi32> -> tensor<3xi16>

// Casts: bf16 -> f64 and i32 -> f16 go through f32; bf16 <-> f32 and bitcasts stay.
func.func @casts(%a: tensor<2xbf16>, %n: tensor<2xi32>, %f: tensor<2xf32>) -> (tensor<2xf64>, tensor<2xf16>, tensor<2xbf16>, tensor<2xi16>) {
  %0 = tess.cast %a : tensor<2xbf16> -> tensor<2xf64>
  %1 = tess.cast %n : tensor<2xi32> -> tensor<2xf16>
  %2 = tess.cast %f : tensor<2xf32> -> tensor<2xbf16>
  %3 = tess.bitcast %a : tensor<2xbf16> -> tensor<2xi16>
  func.return %0, %1, %2, %3 : tensor<2xf64>, tensor<2xf16>, tensor<2xbf16>, tensor<2xi16>
}
// CHECK-LABEL: func.func @casts(
// CHECK-NEXT:    %[[A:.*]] = tess.cast %a : tensor<2xbf16> -> tensor<2xf32>
// CHECK-NEXT:    %{{.*}} = tess.cast %[[A]] : tensor<2xf32> -> tensor<2xf64>
// CHECK-NEXT:    %[[N:.*]] = tess.cast %n : tensor<2xi32> -> tensor<2xf32>
// CHECK-NEXT:    %{{.*}} = tess.cast %[[N]] : tensor<2xf32> -> tensor<2xf16>
// CHECK-NEXT:    %{{.*}} = tess.cast %f : tensor<2xf32> -> tensor<2xbf16>
// CHECK-NEXT:    %{{.*}} = tess.bitcast %a : tensor<2xbf16> -> tensor<2xi16>

// In linalg, the conversions are arith.extf/truncf and the bitcast arith.bitcast.
// LINALG-LABEL: func.func @casts(
// LINALG:         arith.extf %{{.*}} : bf16 to f32
// LINALG:         arith.extf %{{.*}} : f32 to f64
// LINALG:         arith.sitofp %{{.*}} : i32 to f32
// LINALG:         arith.truncf %{{.*}} : f32 to f16
// LINALG:         arith.truncf %{{.*}} : f32 to bf16
// LINALG:         arith.bitcast %{{.*}} : bf16 to i16
