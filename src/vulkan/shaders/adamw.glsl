// adamw_step's arithmetic on four elements (OPS.md section 7: decoupled decay, the moments, the update, in
// the reference's order), shared by adamw_step.comp and adamw_q4gsw_step.comp; precise, so no multiply-add
// is contracted.
void adamw_update(inout vec4 param, inout vec4 m, inout vec4 v, const vec4 g, const float lr, const float b1,
                  const float b2, const float eps, const float wd, const float bc1, const float bc2) {
  precise vec4 p = param, mo = m, ve = v;
  p = p - lr * wd * p;
  mo = b1 * mo + (1.0 - b1) * g;
  ve = b2 * ve + (1.0 - b2) * g * g;
  p = p - lr * (mo / bc1) / (sqrt(ve / bc2) + eps);
  param = p;
  m = mo;
  v = ve;
}
