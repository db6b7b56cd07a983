kernel __attribute__((reqd_work_group_size(1, 1, 1))) void conv_080464b5e4(global unsigned char* mem, const ulong o0, const ulong o1, const ulong o2, const int IH, const int IW, const int OW, const int CIN, const int COUT, const int CG, const int OH, const int SH, const int SW, const int PH, const int PW) {
  global float* p0 = (global float*)(mem + o0);
  global const float* p1 = (global const float*)(mem + o1);
  global const float* p2 = (global const float*)(mem + o2);
  const int qb = (int)get_global_id(0) * 8, co = (int)get_global_id(1) * 16, nb = (int)get_global_id(2);
  const int plane = OH * OW;
  const global float* xb = p1 + (nb * CIN + 0 * CG) * (IH * IW);
  const global float* wb = p2 + (co / 16) * (CG * 144);
  float16 c0 = (float16)(0.0f);
  const int q0 = min(qb + 0, plane - 1);
  const int y0 = (q0 / OW) * SH - PH, x0 = (q0 % OW) * SW - PW;
  const int r0 = y0 * IW + x0;
  float16 c1 = (float16)(0.0f);
  const int q1 = min(qb + 1, plane - 1);
  const int y1 = (q1 / OW) * SH - PH, x1 = (q1 % OW) * SW - PW;
  const int r1 = y1 * IW + x1;
  float16 c2 = (float16)(0.0f);
  const int q2 = min(qb + 2, plane - 1);
  const int y2 = (q2 / OW) * SH - PH, x2 = (q2 % OW) * SW - PW;
  const int r2 = y2 * IW + x2;
  float16 c3 = (float16)(0.0f);
  const int q3 = min(qb + 3, plane - 1);
  const int y3 = (q3 / OW) * SH - PH, x3 = (q3 % OW) * SW - PW;
  const int r3 = y3 * IW + x3;
  float16 c4 = (float16)(0.0f);
  const int q4 = min(qb + 4, plane - 1);
  const int y4 = (q4 / OW) * SH - PH, x4 = (q4 % OW) * SW - PW;
  const int r4 = y4 * IW + x4;
  float16 c5 = (float16)(0.0f);
  const int q5 = min(qb + 5, plane - 1);
  const int y5 = (q5 / OW) * SH - PH, x5 = (q5 % OW) * SW - PW;
  const int r5 = y5 * IW + x5;
  float16 c6 = (float16)(0.0f);
  const int q6 = min(qb + 6, plane - 1);
  const int y6 = (q6 / OW) * SH - PH, x6 = (q6 % OW) * SW - PW;
  const int r6 = y6 * IW + x6;
  float16 c7 = (float16)(0.0f);
  const int q7 = min(qb + 7, plane - 1);
  const int y7 = (q7 / OW) * SH - PH, x7 = (q7 % OW) * SW - PW;
  const int r7 = y7 * IW + x7;
  for (int ci = 0; ci < CG; ++ci) {
    const global float* xc = xb + ci * (IH * IW);
    for (int ky = 0; ky < 3; ++ky) {
      const int dy = ky * 1, ty = dy * IW;
      for (int kx = 0; kx < 3; ++kx) {
        const int dx = kx * 1, tap = ty + dx;
        const float16 wv = vload16((ci * 3 + ky) * 3 + kx, wb);
        { const float v = ((uint)(y0 + dy) < (uint)IH && (uint)(x0 + dx) < (uint)IW) ? xc[r0 + tap] : 0.0f;
          c0 = fma((float16)(v), wv, c0); }
        { const float v = ((uint)(y1 + dy) < (uint)IH && (uint)(x1 + dx) < (uint)IW) ? xc[r1 + tap] : 0.0f;
          c1 = fma((float16)(v), wv, c1); }
        { const float v = ((uint)(y2 + dy) < (uint)IH && (uint)(x2 + dx) < (uint)IW) ? xc[r2 + tap] : 0.0f;
          c2 = fma((float16)(v), wv, c2); }
        { const float v = ((uint)(y3 + dy) < (uint)IH && (uint)(x3 + dx) < (uint)IW) ? xc[r3 + tap] : 0.0f;
          c3 = fma((float16)(v), wv, c3); }
        { const float v = ((uint)(y4 + dy) < (uint)IH && (uint)(x4 + dx) < (uint)IW) ? xc[r4 + tap] : 0.0f;
          c4 = fma((float16)(v), wv, c4); }
        { const float v = ((uint)(y5 + dy) < (uint)IH && (uint)(x5 + dx) < (uint)IW) ? xc[r5 + tap] : 0.0f;
          c5 = fma((float16)(v), wv, c5); }
        { const float v = ((uint)(y6 + dy) < (uint)IH && (uint)(x6 + dx) < (uint)IW) ? xc[r6 + tap] : 0.0f;
          c6 = fma((float16)(v), wv, c6); }
        { const float v = ((uint)(y7 + dy) < (uint)IH && (uint)(x7 + dx) < (uint)IW) ? xc[r7 + tap] : 0.0f;
          c7 = fma((float16)(v), wv, c7); }
      }
    }
  }
  if (qb + 0 < plane) {
    float t[16];
    vstore16(c0, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q0;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 1 < plane) {
    float t[16];
    vstore16(c1, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q1;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 2 < plane) {
    float t[16];
    vstore16(c2, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q2;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 3 < plane) {
    float t[16];
    vstore16(c3, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q3;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 4 < plane) {
    float t[16];
    vstore16(c4, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q4;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 5 < plane) {
    float t[16];
    vstore16(c5, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q5;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 6 < plane) {
    float t[16];
    vstore16(c6, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q6;
      const float s = t[j];
      p0[o] = s;
    }
  }
  if (qb + 7 < plane) {
    float t[16];
    vstore16(c7, 0, t);
    for (int j = 0; j < 16; ++j) {
      const int o = (nb * COUT + co + j) * plane + q7;
      const float s = t[j];
      p0[o] = s;
    }
  }
}

