// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-pack-matmul{min-work=1 vector-bits=512 blocks=32,64,64 in-place-bytes=0},tess-hoist-scratch' | filecheck %s

// Two packed products in one host: each kernel's panels (`ap`, `bp`) become trailing
// arguments, passed as views of the host's workspace past its planned arena (16384 bytes:
// the relu's input), both kernels' at the same offsets (one runs after the other). The
// unused edge tile (`ct`: the tiles divide every extent) is gone. No alloc is left.
func.func @two(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %v: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %h = tess.matmul %x, %w : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  %r = tess.relu %h : tensor<64x64xf32>
  %y = tess.matmul %r, %v : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  func.return %y : tensor<64x64xf32>
}

// CHECK-LABEL: func.func @two(
// CHECK-SAME:      %workspace: memref<[[W:[0-9]+]]xi8> {tess.workspace}
// CHECK-SAME:      tess.workspace_bytes = [[W]] : i64
// CHECK:         %[[A0:.*]] = arith.constant 16384 : index
// CHECK-NEXT:    %[[AP:.*]] = memref.view %workspace[%[[A0]]][] : memref<[[W]]xi8> to memref<[[AN:[0-9]+]]xf32>
// CHECK-NEXT:    %[[B0:.*]] = arith.constant [[BOFF:[0-9]+]] : index
// CHECK-NEXT:    %[[BP:.*]] = memref.view %workspace[%[[B0]]][] : memref<[[W]]xi8> to memref<[[BN:[0-9]+]]xf32>
// CHECK-NEXT:    func.call @two_kernel_1(%x, %w, %out0, %[[AP]], %[[BP]])
// CHECK:         %[[A1:.*]] = arith.constant 16384 : index
// CHECK-NEXT:    %[[AP1:.*]] = memref.view %workspace[%[[A1]]][]
// CHECK-NEXT:    %[[B1:.*]] = arith.constant [[BOFF]] : index
// CHECK-NEXT:    %[[BP1:.*]] = memref.view %workspace[%[[B1]]][]
// CHECK-NEXT:    func.call @two_kernel_4(%{{.*}}, %v, %out0, %[[AP1]], %[[BP1]])
// CHECK:       func.func private @two_kernel_1(%x: memref<64x64xf32>, %w: memref<64x64xf32>, %out0: memref<64x64xf32>, %ap: memref<[[AN]]xf32>, %bp: memref<[[BN]]xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         micro.mma %ap
// CHECK:       func.func private @two_kernel_4(
// CHECK-SAME:      %ap: memref<{{[0-9]+}}xf32>, %bp: memref<{{[0-9]+}}xf32>)
// CHECK-NOT:     memref.alloc
