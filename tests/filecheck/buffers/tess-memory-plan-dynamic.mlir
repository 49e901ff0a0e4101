// Buffers of a `?` dim (issue 26 §2) are sized as expressions of N: one region of
// R * N bytes allocated after N is read at entry, each buffer a view at byte r * N
// (`memory_plan_dynamic.py`); buffers whose live intervals are disjoint share a slot of
// the same width (a row of 4 or of 3 f32, rounded to 8 bytes: 16 per unit of N).
// RUN: tessc-opt %s -p "tess-to-linalg,tess-bufferize,tess-memory-plan" | filecheck %s
// RUN: tessc-opt %s -p "tess-to-linalg,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-linalg-to-loops,canonicalize" -t numba | filecheck %s --check-prefix=NUMBA

// CHECK-LABEL: func.func @chain(
// CHECK:      %n = memref.dim %x, %{{.*}} : memref<?x4xf32>
// CHECK-NEXT: %[[R:.*]] = arith.constant 32 : index
// CHECK-NEXT: %[[BYTES:.*]] = arith.muli %n, %[[R]] : index
// CHECK-NEXT: %dynamic_arena = memref.alloc(%[[BYTES]]) {alignment = 64 : i64} : memref<?xi8>
// CHECK-NOT:  memref.alloc
// CHECK:      %[[A:.*]] = memref.view %dynamic_arena[%{{.*}}][%n] : memref<?xi8> to memref<?x4xf32>
// CHECK:      %[[B_AT:.*]] = arith.constant 16 : index
// CHECK-NEXT: %[[B_SHIFT:.*]] = arith.muli %n, %[[B_AT]] : index
// CHECK-NEXT: %[[B:.*]] = memref.view %dynamic_arena[%[[B_SHIFT]]][%n] : memref<?xi8> to memref<?x4xf32>
// CHECK:      %[[C_AT:.*]] = arith.constant 0 : index
// CHECK-NEXT: %[[C_SHIFT:.*]] = arith.muli %n, %[[C_AT]] : index
// CHECK-NEXT: memref.view %dynamic_arena[%[[C_SHIFT]]][%n] : memref<?xi8> to memref<?x4xf32>
// CHECK:      %[[D_AT:.*]] = arith.constant 16 : index
// CHECK-NEXT: %[[D_SHIFT:.*]] = arith.muli %n, %[[D_AT]] : index
// CHECK-NEXT: memref.view %dynamic_arena[%[[D_SHIFT]]][%n] : memref<?xi8> to memref<?x3xf32>
// CHECK-NOT:  memref.alloc

// The generated host allocates the region once a call and views it by N.
// NUMBA-LABEL: def chain(
// NUMBA:     dynamic_arena = np.empty((
// NUMBA:     .view(np.float32).reshape((n, 4))
// NUMBA-NOT: np.empty
func.func @chain(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>) -> tensor<3xf32> {
  %a = tess.exp %x : tensor<?x4xf32>
  %b = tess.neg %a : tensor<?x4xf32>
  %c = tess.exp %b : tensor<?x4xf32>
  %d = tess.matmul %c, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x3xf32>
  %e = tess.sum %d dims = [0] : tensor<?x3xf32> -> tensor<3xf32>
  func.return %e : tensor<3xf32>
}
