// adamw_step's arithmetic for one element (OPS.md section 7: decoupled decay, the moments, the update, in the
// reference's order), shared by adamw_step.wgsl and adamw_q4gsw_step.wgsl. The including shader declares
// the scalar block `scalars` and a uniform `p` whose fields lr, b1, b2, eps, wd, bc1, bc2 index it.
struct Adamw { lr: f32, b1: f32, b2: f32, eps: f32, wd: f32, bc1: f32, bc2: f32 }

fn adamw_hyper() -> Adamw {
  return Adamw(scalars[p.lr], scalars[p.b1], scalars[p.b2], scalars[p.eps], scalars[p.wd], scalars[p.bc1], scalars[p.bc2]);
}

// (param, m, v) after one step with gradient g.
fn adamw_update(h: Adamw, param: f32, m: f32, v: f32, g: f32) -> vec3<f32> {
  var x = param - h.lr * h.wd * param;
  let mi = h.b1 * m + (1.0 - h.b1) * g;
  let vi = h.b2 * v + (1.0 - h.b2) * g * g;
  x = x - h.lr * (mi / h.bc1) / (sqrt(vi / h.bc2) + h.eps);
  return vec3<f32>(x, mi, vi);
}
