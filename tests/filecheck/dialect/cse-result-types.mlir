// RUN: tessc-opt %s -p cse | filecheck %s

// Two scf.ifs whose regions differ only in a result type (x through i32, x through i64):
// xDSL 0.74's structural equivalence ignores result types and its cse merged them
// (tessc.xdsl_patches.fixes.EQUIVALENCE_COMPARES_RESULT_TYPES); both are kept.
func.func @f(%c: i1, %x: f32) -> (f32, f32) {
  %a = scf.if %c -> (f32) {
    %i = arith.fptosi %x : f32 to i32
    %f = arith.sitofp %i : i32 to f32
    scf.yield %f : f32
  } else {
    scf.yield %x : f32
  }
  %b = scf.if %c -> (f32) {
    %i = arith.fptosi %x : f32 to i64
    %f = arith.sitofp %i : i64 to f32
    scf.yield %f : f32
  } else {
    scf.yield %x : f32
  }
  func.return %a, %b : f32, f32
}

// CHECK:      %a = scf.if %c -> (f32) {
// CHECK:        arith.fptosi %x : f32 to i32
// CHECK:      %b = scf.if %c -> (f32) {
// CHECK:        arith.fptosi %x : f32 to i64
// CHECK:      func.return %a, %b : f32, f32
