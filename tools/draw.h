/* A few drawing primitives for the tools' PNG pictures (scatter plots, slices): an RGB
   canvas, rectangles, lines, dots, and a 3x5 pixel font.  No plotting dependency. */
#ifndef CF_DRAW_H
#define CF_DRAW_H
#include <ctype.h>
typedef struct { int w, h; unsigned char *px; } canvas;

static canvas canvas_new(int w, int h) {
    canvas c;
    c.w = w; c.h = h;
    c.px = (unsigned char *)malloc((size_t)w * h * 3);
    if (!c.px) die("out of memory for a picture");
    memset(c.px, 255, (size_t)w * h * 3);
    return c;
}
static void put(canvas *c, int x, int y, unsigned rgb) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    unsigned char *p = c->px + ((size_t)y * c->w + x) * 3;
    p[0] = (unsigned char)(rgb >> 16); p[1] = (unsigned char)(rgb >> 8); p[2] = (unsigned char)rgb;
}
static void rect(canvas *c, int x0, int y0, int w, int h, unsigned rgb) { int x, y; for (y = y0; y < y0 + h; y++) for (x = x0; x < x0 + w; x++) put(c, x, y, rgb); }
static void line(canvas *c, int x0, int y0, int x1, int y1, unsigned rgb) {   /* Bresenham */
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, err = dx + dy;
    for (;;) {
        put(c, x0, y0, rgb);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * err;
        if (e2 >= dy) { err += dy; x0 += sx; }
        if (e2 <= dx) { err += dx; y0 += sy; }
    }
}
static void dot(canvas *c, int x, int y, unsigned rgb) { rect(c, x - 1, y - 1, 3, 3, rgb); }

/* 3x5 glyphs, rows top to bottom, '1' = ink */
static const char *glyph(int ch) {
    static const char *tab[][2] = {
        {"0", "111101101101111"}, {"1", "010110010010111"}, {"2", "111001111100111"}, {"3", "111001111001111"},
        {"4", "101101111001001"}, {"5", "111100111001111"}, {"6", "111100111101111"}, {"7", "111001010010010"},
        {"8", "111101111101111"}, {"9", "111101111001111"}, {"A", "010101111101101"}, {"B", "110101110101110"},
        {"C", "011100100100011"}, {"D", "110101101101110"}, {"E", "111100110100111"}, {"F", "111100110100100"},
        {"G", "011100101101011"}, {"H", "101101111101101"}, {"I", "111010010010111"}, {"J", "001001001101010"},
        {"K", "101101110101101"}, {"L", "100100100100111"}, {"M", "101111111101101"}, {"N", "110101101101101"},
        {"O", "010101101101010"}, {"P", "110101110100100"}, {"Q", "010101101110011"}, {"R", "110101110101101"},
        {"S", "011100010001110"}, {"T", "111010010010010"}, {"U", "101101101101111"}, {"V", "101101101101010"},
        {"W", "101101111111101"}, {"X", "101101010101101"}, {"Y", "101101010010010"}, {"Z", "111001010100111"},
        {".", "000000000000010"}, {"-", "000000111000000"}, {":", "000010000010000"}, {"=", "000111000111000"},
        {"_", "000000000000111"}, {"(", "001010010010001"}, {")", "100010010010100"}, {"/", "001001010100100"},
        {"%", "101001010100101"}, {",", "000000000010100"}, {"+", "000010111010000"}, {"^", "010101000000000"},
    };
    size_t i;
    ch = toupper(ch);
    for (i = 0; i < sizeof tab / sizeof *tab; i++) if (tab[i][0][0] == ch) return tab[i][1];
    return "000000000000000";
}
/* text at (x, y) with pixel size s; returns the x after the text */
static int text(canvas *c, int x, int y, int s, unsigned rgb, const char *str) {
    for (; *str; str++, x += 4 * s) {
        const char *g = glyph(*str);
        int r, k;
        for (r = 0; r < 5; r++) for (k = 0; k < 3; k++) if (g[r * 3 + k] == '1') rect(c, x + k * s, y + r * s, s, s, rgb);
    }
    return x;
}
/* A line plot of y over x in a w x h panel at (ox, oy): frame, min/max labels, points joined
   by lines, a title.  n may be 1 (a single dot). */
TOOL_UNUSED static void plot_panel(canvas *c, int ox, int oy, int w, int h, const double *x, const double *y, int n,
                       const char *title, unsigned rgb) {
    double xmin = x[0], xmax = x[0], ymin = y[0], ymax = y[0];
    char lab[64];
    int i, px0 = 0, py0 = 0;
    for (i = 1; i < n; i++) {
        xmin = x[i] < xmin ? x[i] : xmin; xmax = x[i] > xmax ? x[i] : xmax;
        ymin = y[i] < ymin ? y[i] : ymin; ymax = y[i] > ymax ? y[i] : ymax;
    }
    if (xmax == xmin) xmax = xmin + 1;
    if (ymax == ymin) { ymax += fabs(ymax) * 0.05 + 1e-6; ymin -= fabs(ymin) * 0.05 + 1e-6; }
    rect(c, ox, oy, w, h, 0xf4f4f4);
    line(c, ox, oy + h - 1, ox + w - 1, oy + h - 1, 0x888888); line(c, ox, oy, ox, oy + h - 1, 0x888888);
    for (i = 0; i < n; i++) {
        int px = ox + (int)((x[i] - xmin) / (xmax - xmin) * (w - 9)) + 4;
        int py = oy + h - 5 - (int)((y[i] - ymin) / (ymax - ymin) * (h - 9));
        if (i) line(c, px0, py0, px, py, rgb);
        dot(c, px, py, rgb);
        px0 = px; py0 = py;
    }
    text(c, ox, oy - 16, 2, 0x000000, title);
    snprintf(lab, sizeof lab, "%.4g", ymax); text(c, ox + w + 4, oy, 2, 0x555555, lab);
    snprintf(lab, sizeof lab, "%.4g", ymin); text(c, ox + w + 4, oy + h - 10, 2, 0x555555, lab);
    snprintf(lab, sizeof lab, "EPOCH %.0f", xmin); text(c, ox, oy + h + 6, 2, 0x555555, lab);
    snprintf(lab, sizeof lab, "%.0f", xmax); text(c, ox + w - 4 * 2 * (int)strlen(lab), oy + h + 6, 2, 0x555555, lab);
}
/* written atomically, and never over one of the run's inputs */
static void canvas_save(canvas *c, const char *path) {
    output_in_dir(path);
    if (cf_png_write(path, c->px, c->w, c->h)) die("%s", cf_failure_reason());
    free(c->px);
}
/* the learning curve's directory and files, checked as outputs before any work */
TOOL_UNUSED static void learning_curve_outputs(const char *dir) {
    char p[4200];
    if (!dir) return;
    output_dir("--png", dir);
    output_dir_not_data("--png", dir);
    snprintf(p, sizeof p, "%s/history.tsv", dir); output_in_dir(p);
    snprintf(p, sizeof p, "%s/learning_curve.png", dir); output_in_dir(p);
}
/* The learning curve: DIR/history.tsv keeps one line per epoch (epochs at or after this one,
   left by a run that was resumed from an earlier checkpoint, are dropped), and
   DIR/learning_curve.png is redrawn from it: training loss left, validation metric right. */
TOOL_UNUSED static void learning_curve(const char *dir, int epoch, double loss, double metric, const char *metric_name) {
    enum { MAXE = 100000 };
    static double ep[MAXE], lo[MAXE], me[MAXE];
    char path[4096], title[64], row[256];
    int n = 0, k;
    FILE *f;
    cf_atomic_file af;
    snprintf(path, sizeof path, "%s/history.tsv", dir);
    if ((f = fopen(path, "r"))) {
        while (n < MAXE - 1 && fgets(row, sizeof row, f)) {
            double a, b, c;
            if (sscanf(row, "%lf %lf %lf", &a, &b, &c) == 3 && a < epoch) { ep[n] = a; lo[n] = b; me[n] = c; n++; }
        }
        fclose(f);
    }
    ep[n] = epoch; lo[n] = loss; me[n] = metric; n++;
    output_in_dir(path);
    if (cf_atomic_open(&af, path)) die("%s", cf_failure_reason());
    snprintf(row, sizeof row, "# epoch train_loss %s\n", metric_name);
    cf_atomic_write(&af, row, strlen(row));
    for (k = 0; k < n; k++) { snprintf(row, sizeof row, "%.0f %.9g %.9g\n", ep[k], lo[k], me[k]); cf_atomic_write(&af, row, strlen(row)); }
    if (cf_atomic_commit(&af)) die("%s", cf_failure_reason());
    {
        canvas c = canvas_new(760, 300);
        snprintf(title, sizeof title, "%s", metric_name);
        for (k = 0; title[k]; k++) if (title[k] == '_') title[k] = ' ';
        plot_panel(&c, 20, 40, 280, 220, ep, lo, n, "TRAIN LOSS", 0xc03030);
        plot_panel(&c, 400, 40, 280, 220, ep, me, n, title, 0x1f60c0);
        snprintf(path, sizeof path, "%s/learning_curve.png", dir);
        canvas_save(&c, path);
    }
}
#endif
