// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-pack-matmul{vector-bits=512 threads=2 blocks=32,512,512 in-place-bytes=0},tess-hoist-scratch' | filecheck %s
// RUN: tessc-opt %s -p 'tess-to-linalg,tess-fuse,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,tess-pack-matmul{vector-bits=512 threads=2 blocks=32,512,512 in-place-bytes=0},tess-hoist-scratch,canonicalize,cse' -t numba | filecheck %s --check-prefix=NUMBA

// Two parallel packed products (a loop over the thread groups, 2^24 multiply-adds each;
// in-place-bytes=0: both operands packed, none read in place)
// around a planned intermediate (the relu's, 133120 bytes at offset 0). Their scratch
// becomes views of the workspace past the arena, which no planned buffer overlaps: B's
// 2 MiB panel (two threads' 512 x 512 f32 slots) first, on a 2 MiB multiple (the region
// starts at 2097152, not 133120), then A's panels, then the first product's edge tile
// (520 columns are no multiple of 32). Both products reuse the same bytes. No alloc is
// left, so the generated code allocates nothing per call and advises no huge pages (the
// runtime's 2 MiB-aligned workspace is advised once).

func.func @two(%x: tensor<64x512xf32>, %w: tensor<512x520xf32>, %v: tensor<520x512xf32>) -> tensor<64x512xf32> {
  %h = tess.matmul %x, %w : tensor<64x512xf32>, tensor<512x520xf32> -> tensor<64x520xf32>
  %r = tess.relu %h : tensor<64x520xf32>
  %y = tess.matmul %r, %v : tensor<64x520xf32>, tensor<520x512xf32> -> tensor<64x512xf32>
  func.return %y : tensor<64x512xf32>
}

// CHECK-LABEL: func.func @two(
// CHECK-SAME:      %workspace: memref<4261888xi8> {tess.workspace}
// CHECK-SAME:      tess.workspace_bytes = 4261888 : i64
// CHECK-SAME:      tess.arena_bytes = 133120 : i64
// CHECK:         memref.view %workspace[%{{.*}}][] : memref<4261888xi8> to memref<64x520xf32>
// CHECK:         %[[A0:.*]] = arith.constant 4194304 : index
// CHECK-NEXT:    %[[AP:.*]] = memref.view %workspace[%[[A0]]][] : memref<4261888xi8> to memref<16384xf32>
// CHECK-NEXT:    %[[B0:.*]] = arith.constant 2097152 : index
// CHECK-NEXT:    %[[BP:.*]] = memref.view %workspace[%[[B0]]][] : memref<4261888xi8> to memref<524288xf32>
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 4259840 : index
// CHECK-NEXT:    %[[CT:.*]] = memref.view %workspace[%[[C0]]][] : memref<4261888xi8> to memref<16x32xf32>
// CHECK-NEXT:    func.call @two_kernel_1(%x, %w, %{{.*}}, %[[AP]], %[[BP]], %[[CT]])
// CHECK:         arith.constant 4194304 : index
// CHECK-NEXT:    memref.view
// CHECK-NEXT:    arith.constant 2097152 : index
// CHECK-NEXT:    memref.view
// CHECK-NEXT:    func.call @two_kernel_4(
// CHECK:       func.func private @two_kernel_1(
// CHECK-SAME:      %ap: memref<16384xf32>, %bp: memref<524288xf32>, %ct: memref<16x32xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         micro.num_threads
// CHECK-NOT:     memref.alloc
// CHECK:         "scf.parallel"
// CHECK-NOT:     memref.alloc
// CHECK:       func.func private @two_kernel_4(
// CHECK-SAME:      %ap: memref<16384xf32>, %bp: memref<524288xf32>)
// CHECK-NOT:     memref.alloc
// CHECK:         "scf.parallel"
// CHECK-NOT:     memref.alloc

// NUMBA:       def two(x, w, v, out0, workspace):
// NUMBA-NOT:     np.empty
// NUMBA:         two_kernel_1(x, w, view0, view1, view2, view3)
// NUMBA:       @njit(parallel=True
// NUMBA-NEXT:  def two_kernel_1(x, w, arg2, ap, bp, ct):
// NUMBA-NOT:     np.empty
// NUMBA-NOT:     huge_pages
// NUMBA:         for g in prange(groups):
// NUMBA:       def two_kernel_4(arg0, v, out0, ap, bp):
// NUMBA-NOT:     np.empty
// NUMBA-NOT:     huge_pages
// NUMBA:         for g in prange(groups):
