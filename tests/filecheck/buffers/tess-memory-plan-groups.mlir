// tess-memory-plan and fuse-epilogue groups: a weight update accumulates its gradient in
// the out-param (fill, matmul, then `w - lr * acc` through `outs`). To let the donated %w
// back that out-param, the accumulation moves to a workspace buffer and the update reads
// it as an input: the update is then the group's only member touching %w or the out-param,
// reading each element of %w where it writes it (after the matmul, which never reads %w).
// RUN: tessc-opt %s -p tess-memory-plan | filecheck %s
// RUN: tessc-opt %s -p 'tess-memory-plan{donation=false}' | filecheck %s --check-prefix=PLAIN

func.func @sgd(%w: memref<4x5xf32> {tess.donated}, %x: memref<6x4xf32>, %dh: memref<6x5xf32>, %out0: memref<4x5xf32>) attributes {tess.num_outputs = 1 : i64} {
  kernel.group {
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%out0 : memref<4x5xf32>) {
    ^bb0(%o: f32):
      %zero = arith.constant 0.000000e+00 : f32
      linalg.yield %zero : f32
    }
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %dh : memref<6x4xf32>, memref<6x5xf32>) outs(%out0 : memref<4x5xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %c, %m : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w : memref<4x5xf32>) outs(%out0 : memref<4x5xf32>) {
    ^bb0(%p: f32, %g: f32):
      %lr = arith.constant 1.000000e-01 : f32
      %step = arith.mulf %lr, %g : f32
      %new = arith.subf %p, %step : f32
      linalg.yield %new : f32
    }
  }
  func.return
}
// CHECK-LABEL: func.func @sgd(%w: memref<4x5xf32> {tess.donated}, %x: memref<6x4xf32>, %dh: memref<6x5xf32>, %out0: memref<4x5xf32> {tess.aliases_input = 0 : i64}, %workspace: memref<80xi8> {tess.workspace})
// CHECK-SAME:    tess.aliased_bytes = 80 : i64
// CHECK:         %acc = memref.view %workspace[%{{.*}}][] : memref<80xi8> to memref<4x5xf32>
// CHECK-NEXT:    kernel.group {
// CHECK-NEXT:      linalg.generic {{.*}} outs(%acc : memref<4x5xf32>)
// CHECK:           linalg.generic {{.*}} ins(%x, %dh : memref<6x4xf32>, memref<6x5xf32>) outs(%acc : memref<4x5xf32>)
// CHECK:           linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w, %acc : memref<4x5xf32>, memref<4x5xf32>) outs(%out0 : memref<4x5xf32>)
// CHECK-NEXT:      ^bb0(%p: f32, %acc{{.*}}: f32, %g: f32):
// CHECK-NEXT:        %lr = arith.constant
// CHECK-NEXT:        %step = arith.mulf %lr, %acc{{.*}} : f32
// CHECK-NOT:     %acc
// CHECK:         func.return
// Without donation the group is left as it is: the out-param is its own accumulator.
// PLAIN-LABEL: func.func @sgd(
// PLAIN-SAME:    tess.arena_bytes = 0 : i64
// PLAIN-NOT:     memref.view
// PLAIN:         func.return

// %w is read again after the group (by the second update): overwriting it in the group
// would be wrong, so the group keeps its in-place accumulator and nothing aliases %w.
func.func @read_later(%w: memref<4x5xf32> {tess.donated}, %x: memref<6x4xf32>, %dh: memref<6x5xf32>, %out0: memref<4x5xf32>, %out1: memref<4x5xf32>) attributes {tess.num_outputs = 2 : i64} {
  kernel.group {
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%out0 : memref<4x5xf32>) {
    ^bb0(%o: f32):
      %zero = arith.constant 0.000000e+00 : f32
      linalg.yield %zero : f32
    }
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %dh : memref<6x4xf32>, memref<6x5xf32>) outs(%out0 : memref<4x5xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %m = arith.mulf %a, %b : f32
      %s = arith.addf %c, %m : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w : memref<4x5xf32>) outs(%out0 : memref<4x5xf32>) {
    ^bb0(%p: f32, %g: f32):
      %new = arith.subf %p, %g : f32
      linalg.yield %new : f32
    }
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w : memref<4x5xf32>) outs(%out1 : memref<4x5xf32>) {
  ^bb0(%p: f32, %o: f32):
    %new = arith.addf %p, %p : f32
    linalg.yield %new : f32
  }
  func.return
}
// CHECK-LABEL: func.func @read_later(%w: memref<4x5xf32> {tess.donated}, %x: memref<6x4xf32>, %dh: memref<6x5xf32>, %out0: memref<4x5xf32>, %out1: memref<4x5xf32> {tess.aliases_input = 0 : i64})
// CHECK-SAME:    tess.arena_bytes = 0 : i64
// CHECK-NEXT:    kernel.group {
// CHECK-NEXT:      linalg.generic {{.*}} outs(%out0 : memref<4x5xf32>)
// CHECK:           linalg.generic {{.*}} outs(%out0 : memref<4x5xf32>)
// CHECK:           linalg.generic {{.*}} ins(%w : memref<4x5xf32>) outs(%out0 : memref<4x5xf32>)

// Momentum: the state update (`m' = 0.9 m + g`) and the weight update (which recomputes
// m' from m) both read the donated %m. The weight update, which reads nothing the state
// update writes, moves before it: the state update is then the last member touching %m
// and overwrites it in place; the weight update overwrites %w.
func.func @momentum(%w: memref<4x5xf32> {tess.donated}, %m: memref<4x5xf32> {tess.donated}, %x: memref<6x4xf32>, %dh: memref<6x5xf32>, %out0: memref<4x5xf32>, %out1: memref<4x5xf32>) attributes {tess.num_outputs = 2 : i64} {
  %acc = memref.alloc() : memref<4x5xf32>
  kernel.group {
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%acc : memref<4x5xf32>) {
    ^bb0(%o: f32):
      %zero = arith.constant 0.000000e+00 : f32
      linalg.yield %zero : f32
    }
    linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%x, %dh : memref<6x4xf32>, memref<6x5xf32>) outs(%acc : memref<4x5xf32>) {
    ^bb0(%a: f32, %b: f32, %c: f32):
      %p = arith.mulf %a, %b : f32
      %s = arith.addf %c, %p : f32
      linalg.yield %s : f32
    }
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%m, %acc : memref<4x5xf32>, memref<4x5xf32>) outs(%out1 : memref<4x5xf32>) attrs = {tess.op = "tess.add"} {
    ^bb0(%mv: f32, %g: f32, %o: f32):
      %mu = arith.constant 9.000000e-01 : f32
      %scaled = arith.mulf %mu, %mv : f32
      %new = arith.addf %scaled, %g : f32
      linalg.yield %new : f32
    }
    linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%w, %m, %acc : memref<4x5xf32>, memref<4x5xf32>, memref<4x5xf32>) outs(%out0 : memref<4x5xf32>) attrs = {tess.op = "tess.sub"} {
    ^bb0(%wv: f32, %mv: f32, %g: f32, %o: f32):
      %mu = arith.constant 9.000000e-01 : f32
      %scaled = arith.mulf %mu, %mv : f32
      %mnew = arith.addf %scaled, %g : f32
      %lr = arith.constant 1.000000e-01 : f32
      %step = arith.mulf %lr, %mnew : f32
      %new = arith.subf %wv, %step : f32
      linalg.yield %new : f32
    }
  }
  func.return
}
// CHECK-LABEL: func.func @momentum(%w: memref<4x5xf32> {tess.donated}, %m: memref<4x5xf32> {tess.donated}, %x: memref<6x4xf32>, %dh: memref<6x5xf32>, %out0: memref<4x5xf32> {tess.aliases_input = 0 : i64}, %out1: memref<4x5xf32> {tess.aliases_input = 1 : i64}, %workspace: memref<80xi8> {tess.workspace})
// CHECK:         kernel.group {
// CHECK:           linalg.generic {{.*}} ins(%x, %dh
// CHECK:           linalg.generic {{.*}} ins(%w, %m, %acc : memref<4x5xf32>, memref<4x5xf32>, memref<4x5xf32>) outs(%out0 : memref<4x5xf32>) attrs = {tess.op = "tess.sub"}
// CHECK:           linalg.generic {{.*}} ins(%m, %acc : memref<4x5xf32>, memref<4x5xf32>) outs(%out1 : memref<4x5xf32>) attrs = {tess.op = "tess.add"}
// CHECK:         func.return
// PLAIN-LABEL: func.func @momentum(
// PLAIN:           attrs = {tess.op = "tess.add"}
// PLAIN:           attrs = {tess.op = "tess.sub"}
