/* Particle-mesh universes for cf-synth cosmo (--lpt 1|2, --pm N): what the lognormal field
   lacks is collapsed structure (halos, filaments), and that is where the CosmoFlow papers say a
   CNN reads more than the power spectrum.  In the manner of FastPM (Feng et al. 2016):

   1. The same linear spectrum as the lognormal path (BBKS, sigma_8 at z = 0), drawn on the
      grid of Np^3 particles, one per (70/H_0 Mpc)^3 (the real data's density), Np = S x voxel.
   2. Initial displacements at z = 9 from Lagrangian perturbation theory: Zel'dovich,
      x = q + D1 psi1 with psi1(k) = i k delta(k) / k^2, and with --lpt 2 the second order,
      + D2 psi2, D2 = -3/7 D1^2, psi2(k) = -i k delta2(k) / k^2, delta2 the sum of the
      principal minors of the Hessian of phi1 (phi1(k) = -delta(k)/k^2).
   3. N leapfrog (kick-drift-kick) steps in the scale factor a to each output redshift (3, 1.5,
      0.5, 0), one force evaluation a step.
      Momenta p = a^3 E(a) dx/da; dp/da = F / (a E), F = -grad phi, laplacian phi =
      1.5 Omega_m delta / a, delta from cloud-in-cell assignment on a mesh of (B Np)^3 cells
      (--pm-mesh B, default 2), phi by FFT, F interpolated back by cloud-in-cell.  FastPM's factors make linear growth exact for any
      number of steps: a kick from a0 to a1 with the force at ac multiplies F by
      (G(a1) - G(a0)) ac / (1.5 Omega_m D1(ac)), G = a^3 E dD1/da; a drift from a0 to a1 with
      the momentum at ac multiplies p by (D1(a1) - D1(a0)) / G(ac).  (docs/science.md)
   4. Counts: particles per voxel by nearest grid point (the cell a particle is in), as the
      real histograms are made.  --pm 0: the LPT positions at each output, no PM steps.
   FFTW (single precision, FFTW_ESTIMATE plans, arrays from fftwf_malloc) makes the same seed
   give the same bytes.  Without FFTW (make FFTW=0) cf-synth has only the lognormal path. */
#ifndef CF_TOOLS_SYNTH_PM_H
#define CF_TOOLS_SYNTH_PM_H
#ifdef CF_USE_FFTW
#include <fftw3.h>

/* ---- flat Lambda-CDM background and linear growth, D1(1) = 1 */
typedef struct { double om, norm; } pm_cosmo;
static double pm_E(const pm_cosmo *c, double a) { return sqrt(c->om / (a * a * a) + 1 - c->om); }
static double pm_growth_integral(const pm_cosmo *c, double a) {   /* int_0^a da' / (a' E(a'))^3, Simpson */
    int i, n = 2000;
    double h = a / n, s = 0;
    for (i = 0; i <= n; i++) {
        double x = i * h, f = x > 0 ? pow(c->om / x + (1 - c->om) * x * x, -1.5) : 0;
        s += f * (i == 0 || i == n ? 1 : i % 2 ? 4 : 2);
    }
    return s * h / 3;
}
static double pm_D_raw(const pm_cosmo *c, double a) { return 2.5 * c->om * pm_E(c, a) * pm_growth_integral(c, a); }
static pm_cosmo pm_cosmo_new(double om) { pm_cosmo c; c.om = om; c.norm = 1; c.norm = pm_D_raw(&c, 1.0); return c; }
static double pm_D(const pm_cosmo *c, double a) { return pm_D_raw(c, a) / c->norm; }
static double pm_dD(const pm_cosmo *c, double a) {   /* dD1/da */
    double E = pm_E(c, a), dE = -1.5 * c->om / (a * a * a * a * E);
    return 2.5 * c->om * (dE * pm_growth_integral(c, a) + E / pow(a * E, 3)) / c->norm;
}
static double pm_G(const pm_cosmo *c, double a) { return a * a * a * pm_E(c, a) * pm_dD(c, a); }

/* complex values as (re, im) pairs: fftwf_complex itself becomes C99's float _Complex when
   <complex.h> was included first, so the arrays are declared as pairs and cast for FFTW */
typedef float pm_cpx[2];
/* ---- the grid: n^3 real values, n x n x (n/2 + 1) complex in FFTW's half-complex layout */
typedef struct {
    int n;
    size_t N, Nc;
    float *r;                 /* n^3 real */
    pm_cpx *c, *t;            /* the transform, and a scratch copy for the inverse */
    fftwf_plan fwd, inv;
} pm_grid;
static int pm_grid_new(pm_grid *g, int n) {
    g->n = n; g->N = (size_t)n * n * n; g->Nc = (size_t)n * n * (n / 2 + 1);
    g->r = (float *)fftwf_malloc(sizeof(float) * g->N);
    g->c = (pm_cpx *)fftwf_malloc(sizeof(pm_cpx) * g->Nc);
    g->t = (pm_cpx *)fftwf_malloc(sizeof(pm_cpx) * g->Nc);
    if (!g->r || !g->c || !g->t) return -1;
    TOOL_OMP(omp critical(pm_fftw_plan))   /* planning is not thread-safe in FFTW */
    {
        g->fwd = fftwf_plan_dft_r2c_3d(n, n, n, g->r, (fftwf_complex *)g->c, FFTW_ESTIMATE);
        g->inv = fftwf_plan_dft_c2r_3d(n, n, n, (fftwf_complex *)g->t, g->r, FFTW_ESTIMATE);
    }
    return g->fwd && g->inv ? 0 : -1;
}
static void pm_grid_free(pm_grid *g) {
    if (!g->r && !g->c && !g->t) return;
    TOOL_OMP(omp critical(pm_fftw_plan))
    { if (g->fwd) fftwf_destroy_plan(g->fwd); if (g->inv) fftwf_destroy_plan(g->inv); }
    fftwf_free(g->r); fftwf_free(g->c); fftwf_free(g->t);
}
static void pm_forward(pm_grid *g) { fftwf_execute(g->fwd); }
static void pm_inverse(pm_grid *g) { fftwf_execute(g->inv); }   /* from g->t into g->r */
/* the integer wave vector (m_i, m_j, m_k) of half-complex index q, in fundamental
   frequencies; returns 1 for a mode on a Nyquist plane (which every operator here zeroes) */
static int pm_kvec(const pm_grid *g, size_t q, int m[3]) {
    int n = g->n, h = n / 2 + 1;
    int k = (int)(q % h), j = (int)(q / h % n), i = (int)(q / h / n);
    m[0] = i <= n / 2 ? i : i - n; m[1] = j <= n / 2 ? j : j - n; m[2] = k;
    return i == n / 2 || j == n / 2 || k == n / 2;
}
/* Positions are in cells and wave vectors kappa = 2 pi m / n per cell.  pm_apply puts into r
   the inverse transform of c times an operator:
     b < 0:  i scale m_a / |m|^2   (a gradient of the inverse laplacian: displacements, forces)
     b >= 0: scale m_a m_b / |m|^2 (a second derivative of the inverse laplacian)
   the k = 0 and Nyquist modes set to 0. */
static void pm_apply(pm_grid *g, int a, int b, double scale) {
    size_t q;
    for (q = 0; q < g->Nc; q++) {
        int m[3], nyq = pm_kvec(g, q, m);
        double m2 = (double)m[0] * m[0] + (double)m[1] * m[1] + (double)m[2] * m[2], f, re = g->c[q][0], im = g->c[q][1];
        if (m2 == 0 || nyq) { g->t[q][0] = g->t[q][1] = 0; continue; }
        if (b < 0) { f = scale * m[a] / m2; g->t[q][0] = (float)(-im * f); g->t[q][1] = (float)(re * f); }
        else { f = scale * (double)m[a] * m[b] / m2; g->t[q][0] = (float)(re * f); g->t[q][1] = (float)(im * f); }
    }
    pm_inverse(g);
}

/* ---- cloud-in-cell on the periodic n^3 mesh of cell size 1 (positions in cells) */
static void pm_cic_weights(float x, int n, int *i0, int *i1, float *w1) {
    float u = x - 0.5f;   /* cell centres at i + 0.5 */
    int i = (int)floorf(u);
    *w1 = u - (float)i;
    *i0 = ((i % n) + n) % n; *i1 = (*i0 + 1) % n;
}
/* cloud-in-cell counts of particles at pos x scale (mesh cells) on an n^3 mesh */
static void pm_deposit(float *rho, int n, const float *pos, size_t np, float scale) {
    size_t p;
    memset(rho, 0, sizeof(float) * (size_t)n * n * n);
    for (p = 0; p < np; p++) {
        int a0, a1, b0, b1, c0, c1;
        float wa, wb, wc;
        pm_cic_weights(pos[3 * p] * scale, n, &a0, &a1, &wa); pm_cic_weights(pos[3 * p + 1] * scale, n, &b0, &b1, &wb);
        pm_cic_weights(pos[3 * p + 2] * scale, n, &c0, &c1, &wc);
#define PM_AT(i, j, k) rho[((size_t)(i) * n + (j)) * n + (k)]
        PM_AT(a0, b0, c0) += (1 - wa) * (1 - wb) * (1 - wc); PM_AT(a0, b0, c1) += (1 - wa) * (1 - wb) * wc;
        PM_AT(a0, b1, c0) += (1 - wa) * wb * (1 - wc);       PM_AT(a0, b1, c1) += (1 - wa) * wb * wc;
        PM_AT(a1, b0, c0) += wa * (1 - wb) * (1 - wc);       PM_AT(a1, b0, c1) += wa * (1 - wb) * wc;
        PM_AT(a1, b1, c0) += wa * wb * (1 - wc);             PM_AT(a1, b1, c1) += wa * wb * wc;
    }
}
static float pm_interp(const float *f, int n, const float *x) {
    int a0, a1, b0, b1, c0, c1;
    float wa, wb, wc;
    pm_cic_weights(x[0], n, &a0, &a1, &wa); pm_cic_weights(x[1], n, &b0, &b1, &wb); pm_cic_weights(x[2], n, &c0, &c1, &wc);
#define PM_F(i, j, k) f[((size_t)(i) * n + (j)) * n + (k)]
    return (1 - wa) * ((1 - wb) * ((1 - wc) * PM_F(a0, b0, c0) + wc * PM_F(a0, b0, c1)) + wb * ((1 - wc) * PM_F(a0, b1, c0) + wc * PM_F(a0, b1, c1))) +
           wa * ((1 - wb) * ((1 - wc) * PM_F(a1, b0, c0) + wc * PM_F(a1, b0, c1)) + wb * ((1 - wc) * PM_F(a1, b1, c0) + wc * PM_F(a1, b1, c1)));
}

/* ---- one universe */
typedef struct {
    pm_grid g;        /* the particles' grid (initial conditions) */
    pm_grid m;        /* the force mesh, B times finer */
    int B;
    pm_cosmo cos;
    int n;            /* particles per side */
    size_t np;
    float *psi[6];    /* psi1 (x, y, z), psi2 (x, y, z), in cells; psi2 only with --lpt 2 */
    float *pos, *mom; /* particles: positions in cells, momenta (in cells) */
} pm_state;

/* the linear density delta(k) at z = 0 in g.c, for a box of L Mpc/h with n^3 cells */
static void pm_linear(pm_state *s, cf_rng *r, double L, double A, double ns, double gamma, int fixed) {
    pm_grid *g = &s->g;
    size_t q;
    double dq = L / s->n;
    for (q = 0; q < g->N; q++) g->r[q] = (float)cf_rng_normal(r);
    pm_forward(g);
    for (q = 0; q < g->Nc; q++) {
        int mm[3], nyq = pm_kvec(g, q, mm);
        double kk = 2 * M_PI / L * sqrt((double)mm[0] * mm[0] + (double)mm[1] * mm[1] + (double)mm[2] * mm[2]), amp, m;
        /* |W|^2 averages N; delta = W sqrt(P / dq^3) / N after the inverse transform */
        amp = kk > 0 && !nyq ? sqrt(A * pk_shape(kk, ns, gamma) / (dq * dq * dq)) / (double)g->N : 0;
        if (fixed && (m = sqrt((double)g->c[q][0] * g->c[q][0] + (double)g->c[q][1] * g->c[q][1])) > 0) amp *= sqrt((double)g->N) / m;
        g->c[q][0] = (float)(g->c[q][0] * amp); g->c[q][1] = (float)(g->c[q][1] * amp);
    }
}
static float *pm_copy_r(const pm_grid *g) {
    float *f = (float *)malloc(sizeof(float) * g->N);
    if (f) memcpy(f, g->r, sizeof(float) * g->N);
    return f;
}
/* psi1 from delta(k); with lpt 2 also psi2 (delta(k) in g.c is kept) */
static int pm_lpt(pm_state *s, int lpt) {
    pm_grid *g = &s->g;
    pm_cpx *dk = (pm_cpx *)malloc(sizeof(pm_cpx) * g->Nc);
    float *d2, *h[3];
    size_t q;
    int a;
    if (!dk) return -1;
    memcpy(dk, g->c, sizeof(pm_cpx) * g->Nc);
    /* psi1 = i kappa delta / kappa^2 = i m delta / |m|^2 x n / (2 pi), in cells */
    for (a = 0; a < 3; a++) { pm_apply(g, a, -1, s->n / (2 * M_PI)); if (!(s->psi[a] = pm_copy_r(g))) return -1; }
    if (lpt < 2) { free(dk); return 0; }
    for (a = 0; a < 3; a++) { pm_apply(g, a, a, 1.0); if (!(h[a] = pm_copy_r(g))) return -1; }   /* phi1,aa */
    d2 = h[0];   /* delta2 = xx yy + xx zz + yy zz - xy^2 - xz^2 - yz^2, built in place of xx */
    for (q = 0; q < g->N; q++) d2[q] = h[0][q] * h[1][q] + h[0][q] * h[2][q] + h[1][q] * h[2][q];
    free(h[1]); free(h[2]);
    {
        static const int pairs[3][2] = {{0, 1}, {0, 2}, {1, 2}};
        int p;
        for (p = 0; p < 3; p++) {
            pm_apply(g, pairs[p][0], pairs[p][1], 1.0);
            for (q = 0; q < g->N; q++) d2[q] -= g->r[q] * g->r[q];
        }
    }
    memcpy(g->r, d2, sizeof(float) * g->N);
    free(d2);
    pm_forward(g);
    for (q = 0; q < g->Nc; q++) { g->c[q][0] /= (float)g->N; g->c[q][1] /= (float)g->N; }
    for (a = 0; a < 3; a++) { pm_apply(g, a, -1, -s->n / (2 * M_PI)); if (!(s->psi[3 + a] = pm_copy_r(g))) return -1; }   /* grad phi2 */
    memcpy(g->c, dk, sizeof(pm_cpx) * g->Nc);
    free(dk);
    return 0;
}
/* the force F = -grad phi (in cells per unit a, see the top) at a, interpolated to the
   particles and added to the momenta times kick */
static void pm_kick(pm_state *s, double a, double kick) {
    pm_grid *g = &s->m;
    size_t q, p;
    int ax, B = s->B;
    float mean = 1.0f / (float)(B * B * B), x[3];
    pm_deposit(g->r, g->n, s->pos, s->np, (float)B);
    for (q = 0; q < g->N; q++) g->r[q] = g->r[q] / mean - 1.0f;   /* delta on the mesh */
    pm_forward(g);
    for (q = 0; q < g->Nc; q++) { g->c[q][0] /= (float)g->N; g->c[q][1] /= (float)g->N; }
    for (ax = 0; ax < 3; ax++) {   /* F(kappa) = 1.5 Omega_m / a  i kappa delta / kappa^2, in mesh cells; / B in particle cells */
        pm_apply(g, ax, -1, 1.5 * s->cos.om / a * g->n / (2 * M_PI) / B);
        for (p = 0; p < s->np; p++) {
            x[0] = s->pos[3 * p] * B; x[1] = s->pos[3 * p + 1] * B; x[2] = s->pos[3 * p + 2] * B;
            s->mom[3 * p + ax] += (float)kick * pm_interp(g->r, g->n, x);
        }
    }
}
static void pm_drift(pm_state *s, double drift) {
    size_t p;
    float n = (float)s->n;
    for (p = 0; p < 3 * s->np; p++) {
        float x = s->mom ? s->pos[p] + (float)drift * s->mom[p] : s->pos[p];
        x = fmodf(x, n);
        s->pos[p] = x < 0 ? x + n : x >= n ? 0 : x;
    }
}
/* the LPT positions and momenta of every particle at a */
static void pm_particles_at(pm_state *s, double a, int lpt) {
    double D1 = pm_D(&s->cos, a), D2 = -3.0 / 7.0 * D1 * D1, G = a * a * a * pm_E(&s->cos, a), dD1 = pm_dD(&s->cos, a), dD2 = -6.0 / 7.0 * D1 * dD1;
    int i, j, k, ax, n = s->n;
    for (i = 0; i < n; i++) for (j = 0; j < n; j++) for (k = 0; k < n; k++) {
        size_t q = ((size_t)i * n + j) * n + k;
        double qq[3] = {i + 0.5, j + 0.5, k + 0.5};
        for (ax = 0; ax < 3; ax++) {
            double d = D1 * s->psi[ax][q] + (lpt > 1 ? D2 * s->psi[3 + ax][q] : 0);
            double v = G * (dD1 * s->psi[ax][q] + (lpt > 1 ? dD2 * s->psi[3 + ax][q] : 0));
            s->pos[3 * q + ax] = (float)(qq[ax] + d);
            if (s->mom) s->mom[3 * q + ax] = (float)v;
        }
    }
    pm_drift(s, 0);   /* wrap into the box */
}
/* counts per voxel (nearest grid point) into channel c of x (S,S,S,4); `per` cells a voxel */
static void pm_count(const pm_state *s, int16_t *x, int S, int per, int c) {
    size_t p, v, N = (size_t)S * S * S;
    int *cnt = (int *)calloc(N, sizeof(int));
    if (!cnt) return;
    for (p = 0; p < s->np; p++) {
        int i = (int)(s->pos[3 * p] / per), j = (int)(s->pos[3 * p + 1] / per), k = (int)(s->pos[3 * p + 2] / per);
        if (i >= S) i = S - 1;
        if (j >= S) j = S - 1;
        if (k >= S) k = S - 1;
        cnt[((size_t)i * S + j) * S + k]++;
    }
    for (v = 0; v < N; v++) x[v * 4 + c] = (int16_t)(cnt[v] > 32767 ? 32767 : cnt[v]);
    free(cnt);
}
static void pm_free(pm_state *s) {
    int a;
    pm_grid_free(&s->g);
    if (s->m.r) pm_grid_free(&s->m);
    for (a = 0; a < 6; a++) free(s->psi[a]);
    free(s->pos); free(s->mom);
}

/* The step boundaries: `steps` equal steps in a from a_init to 1, and the output times
   among them.  Returns their number; b[] ascending. */
static int pm_schedule(double *b, double a_init, int steps, const double *outputs, int n_out) {
    int nb = 0, i, j;
    for (i = 0; i <= steps; i++) b[nb++] = a_init + (1 - a_init) * i / steps;
    for (j = 0; j < n_out; j++) {
        int seen = 0;
        for (i = 0; i < nb; i++) seen |= fabs(b[i] - outputs[j]) < 1e-9;
        if (!seen) b[nb++] = outputs[j];
    }
    for (i = 1; i < nb; i++) for (j = i; j > 0 && b[j] < b[j - 1]; j--) { double t = b[j]; b[j] = b[j - 1]; b[j - 1] = t; }
    return nb;
}

/* One particle-mesh universe: x (S,S,S,4) counts at z = 0, 0.5, 1.5, 3 (channels 0-3).
   per: particles (and mesh cells) per voxel side; L the box in Mpc/h.  Returns 0, or -1 out
   of memory. */
static int pm_universe(int16_t *x, int S, int per, double L, double om, double A, double ns, double gamma,
                       int lpt, int steps, int B, int fixed, cf_rng *r) {
    static const double z_out[4] = {0.0, 0.5, 1.5, 3.0};
    double a_out[4], b[256 + 8], a_init = 0.1;
    pm_state s;
    int c, nb, i;
    memset(&s, 0, sizeof s);
    s.n = S * per; s.np = (size_t)s.n * s.n * s.n; s.B = B;
    s.cos = pm_cosmo_new(om);
    if (pm_grid_new(&s.g, s.n)) { pm_free(&s); return -1; }
    s.pos = (float *)malloc(sizeof(float) * 3 * s.np);
    if (steps > 0) s.mom = (float *)malloc(sizeof(float) * 3 * s.np);
    if (!s.pos || (steps > 0 && !s.mom)) { pm_free(&s); return -1; }
    pm_linear(&s, r, L, A, ns, gamma, fixed);
    if (pm_lpt(&s, lpt)) { pm_free(&s); return -1; }
    for (c = 0; c < 4; c++) a_out[c] = 1 / (1 + z_out[c]);
    if (steps == 0) {   /* LPT alone: the positions at each output time */
        for (c = 0; c < 4; c++) { pm_particles_at(&s, a_out[c], lpt); pm_count(&s, x, S, per, c); }
        pm_free(&s);
        return 0;
    }
    pm_particles_at(&s, a_init, lpt);
    for (c = 0; c < 6; c++) { free(s.psi[c]); s.psi[c] = NULL; }
    pm_grid_free(&s.g);
    memset(&s.g, 0, sizeof s.g);
    if (pm_grid_new(&s.m, s.n * B)) { pm_free(&s); return -1; }
    nb = pm_schedule(b, a_init, steps, a_out, 4);
    for (i = 0; i + 1 < nb; i++) {   /* leapfrog: one force a step, the kick across both half steps */
        double a0 = b[i], a1 = b[i + 1], ah = 0.5 * (a0 + a1), aprev = i ? 0.5 * (b[i - 1] + a0) : a0;
        pm_kick(&s, a0, (pm_G(&s.cos, ah) - pm_G(&s.cos, aprev)) * a0 / (1.5 * om * pm_D(&s.cos, a0)));
        pm_drift(&s, (pm_D(&s.cos, a1) - pm_D(&s.cos, a0)) / pm_G(&s.cos, ah));
        for (c = 0; c < 4; c++) if (fabs(a1 - a_out[c]) < 1e-9) pm_count(&s, x, S, per, c);
    }
    pm_free(&s);
    return 0;
}
#endif
#endif
