// conv + bias + relu is one kernel on the cpu pipeline: the conv generic reads its input
// through a window map (oh * s + kh * d), which pattern_kind classifies as a contraction
// (MATMUL), so tess-fuse-epilogue groups the bias add and the relu after it, sharing the
// (n, f) rows, and tess-linalg-to-loops fuses the nests into one kernel. The padding is a
// separate kernel writing the padded input (@padded); without padding, one kernel (@valid).
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse{report=true},tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue{report=true},tess-fuse-horizontal{donated-only=true}' | filecheck %s --check-prefix=GROUP
// RUN: tessc-opt %s -p 'dce,tess-to-linalg,tess-fuse,tess-pack-narrow,tess-cse-generics,tess-fuse-epilogue,tess-fuse-horizontal{donated-only=true},tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-pack-matmul,tess-interchange-rows,tess-row-dots,tess-tile,tess-tile-dot,tess-parallel-columns,tess-register-accumulate,tess-expand-math,tess-hoist-constants,tess-hoist-scratch,canonicalize,cse' | filecheck %s

// GROUP-LABEL: func.func @padded
// GROUP:       tess.op = "tess.pad"
// GROUP:       kernel.group -> (tensor<2x4x8x8xf32>) attributes {tess.grouped = ["linalg.fill", "tess.conv", "tess.add", "tess.relu"]
// GROUP-LABEL: func.func @valid
// GROUP-NOT:   tess.pad
// GROUP:       kernel.group -> (tensor<2x4x6x6xf32>) attributes {tess.grouped = ["linalg.fill", "tess.conv", "tess.add", "tess.relu"]

// CHECK-LABEL: func.func @padded(
// CHECK:         func.call @padded_kernel_0(
// CHECK-NEXT:    func.call @padded_kernel_1(%out0,
// CHECK-NEXT:    func.return
// CHECK:       func.func private @padded_kernel_0(
// CHECK:         arith.select
// CHECK:       func.func private @padded_kernel_1(
// CHECK:         "scf.parallel"
// CHECK:         arith.mulf
// CHECK:         arith.addf
// CHECK:         arith.maximumf
// CHECK:         scf.reduce
// CHECK-NEXT:  }) {tess.tile_sizes
// CHECK-NOT:   func.func private @padded_kernel_2
// CHECK-LABEL: func.func @valid(
// CHECK:         func.call @valid_kernel_0(%out0, %x, %w, %b)
// CHECK-NEXT:    func.return
// CHECK:       func.func private @valid_kernel_0(
// CHECK:         arith.mulf
// CHECK:         arith.maximumf
// CHECK-NOT:   func.func private @valid_kernel_1

func.func @padded(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<2x4x8x8xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [1, 1] padding_high = [1, 1] groups = 1 : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
  %1 = tess.add %0, %b : tensor<2x4x8x8xf32>, tensor<4x1x1xf32> -> tensor<2x4x8x8xf32>
  %2 = tess.relu %1 : tensor<2x4x8x8xf32>
  func.return %2 : tensor<2x4x8x8xf32>
}

func.func @valid(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4x1x1xf32>) -> tensor<2x4x6x6xf32> {
  %0 = tess.conv %x, %w strides = [1, 1] dilations = [1, 1] padding_low = [0, 0] padding_high = [0, 0] groups = 1 : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x6x6xf32>
  %1 = tess.add %0, %b : tensor<2x4x6x6xf32>, tensor<4x1x1xf32> -> tensor<2x4x6x6xf32>
  %2 = tess.relu %1 : tensor<2x4x6x6xf32>
  func.return %2 : tensor<2x4x6x6xf32>
}
