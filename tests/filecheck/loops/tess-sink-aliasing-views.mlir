// RUN: tessc-opt %s -p tess-sink-aliasing-views | filecheck %s

// The body stores to %out and reads it through %rows, a view made outside the loop: the
// view is made again at the top of the body, which then names %out's memory once.
func.func @fill_then_accumulate(%out: memref<2x3x4xf32>, %x: memref<2x12xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %zero = arith.constant 0.000000e+00 : f32
  %rows = memref.collapse_shape %out [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
"scf.parallel"(%c0, %c2, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%n: index):
    memref.store %zero, %out[%n, %c0, %c0] : memref<2x3x4xf32>
    %a = memref.load %rows[%n, %c0] : memref<2x12xf32>
    %b = memref.load %x[%n, %c0] : memref<2x12xf32>
    %s = arith.addf %a, %b : f32
    memref.store %s, %rows[%n, %c0] : memref<2x12xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  %after = memref.load %rows[%c0, %c0] : memref<2x12xf32>
  func.return
}

// CHECK-LABEL: func.func @fill_then_accumulate(
// CHECK:         %rows = memref.collapse_shape %out
// CHECK:         "scf.parallel"(%c0, %c2, %c1)
// CHECK-NEXT:    ^{{.*}}(%n: index):
// CHECK-NEXT:      %[[ROWS:.+]] = memref.collapse_shape %out 
// CHECK-NEXT:      memref.store %zero, %out[%n, %c0, %c0]
// CHECK-NEXT:      %{{.+}} = memref.load %[[ROWS]][%n, %c0]
// CHECK:           memref.store %{{.+}}, %[[ROWS]][%n, %c0]
// CHECK:         })
// The use after the loop keeps the view made outside.
// CHECK:         %after = memref.load %rows[%c0, %c0]

// A chain of views (a subview of a reshape) is made again whole, in order.
func.func @chain(%out: memref<4x6xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.000000e+00 : f32
  %flat = memref.collapse_shape %out [[0, 1]] : memref<4x6xf32> into memref<24xf32>
  %tail = memref.subview %flat[6] [18] [1] : memref<24xf32> to memref<18xf32, strided<[1], offset: 6>>
"scf.parallel"(%c0, %c4, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%i: index):
    memref.store %zero, %out[%i, %c0] : memref<4x6xf32>
    %v = memref.load %tail[%i] : memref<18xf32, strided<[1], offset: 6>>
    memref.store %v, %out[%i, %c1] : memref<4x6xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// CHECK-LABEL: func.func @chain(
// CHECK:         "scf.parallel"(%c0, %c4, %c1)
// CHECK-NEXT:    ^{{.*}}(%i: index):
// CHECK-NEXT:      %[[FLAT:.+]] = memref.collapse_shape %out
// CHECK-NEXT:      %[[TAIL:.+]] = memref.subview %[[FLAT]][6] [18] [1]
// CHECK-NEXT:      memref.store %zero, %out[%i, %c0]
// CHECK-NEXT:      %{{.+}} = memref.load %[[TAIL]][%i]

// Left alone: a view the body uses without its buffer, a `memref.cast` (the buffer's own
// name in the generated code), and the memory plan's windows into the arena (disjoint
// buffers by the plan's construction).
func.func @untouched(%out: memref<2x12xf32>, %in: memref<2x3x4xf32>, %arena: memref<192xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c96 = arith.constant 96 : index
  %flat = memref.collapse_shape %in [[0], [1, 2]] : memref<2x3x4xf32> into memref<2x12xf32>
  %same = "memref.cast"(%out) : (memref<2x12xf32>) -> memref<?x12xf32>
  %a = memref.view %arena[%c0][] : memref<192xi8> to memref<2x12xf32>
  %b = memref.view %arena[%c96][] : memref<192xi8> to memref<2x12xf32>
"scf.parallel"(%c0, %c2, %c1) <{operandSegmentSizes = array<i32: 1, 1, 1, 0>}> ({
  ^bb0(%n: index):
    %v = memref.load %flat[%n, %c0] : memref<2x12xf32>
    memref.store %v, %out[%n, %c0] : memref<2x12xf32>
    %w = memref.load %same[%n, %c1] : memref<?x12xf32>
    %u = memref.load %a[%n, %c0] : memref<2x12xf32>
    memref.store %u, %b[%n, %c0] : memref<2x12xf32>
    scf.reduce
  }) : (index, index, index) -> ()
  func.return
}

// CHECK-LABEL: func.func @untouched(
// CHECK:         "scf.parallel"
// CHECK-NOT:       memref.collapse_shape
// CHECK-NOT:       memref.cast
// CHECK-NOT:       memref.view
// CHECK:         func.return
