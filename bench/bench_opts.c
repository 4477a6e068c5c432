/* arcoll-bench's options: usage and parsing. */
#include "bench/bench.h"

/* ---- Options ---- */

void bench_usage(FILE *f)
{
    fprintf(
        f,
        "usage: mpirun -np N arcoll-bench%s [options]\n"
        "  -t, --coll LIST       collectives, comma-separated (both): alltoall, allgather,\n"
        "                        allgatherv, alltoallv, reduce_scatter (_block), allreduce;\n"
        "                        both = alltoall,allgather; all = every one\n"
        "  -a, --alg LIST        algorithms side by side (pap,direct%s): pap, direct, and\n"
        "                        each -t collective's ARCOLL_*_ALG names (e.g. ring, rdd, "
        "rdh,\n"
        "                        shm_direct, pap_shm; auto)%s; every one must serve every "
        "-t;\n"
        "                        ALG/copy, ALG/zcopy, ALG/auto: that algorithm on that data\n"
        "                        path (pap/copy,pap/zcopy compares the paths in one run)\n"
        "  -b, --baseline ALG    numerator of the ratio columns (mpi, else direct, else "
        "the first)\n"
        "  -m, --message-size [MIN:]MAX   k/M suffixes (1:1M): bytes per peer (alltoall), "
        "per\n"
        "                        rank (allgather), their means (v-forms), per block\n"
        "                        (reduce_scatter), of the vector (allreduce); the "
        "reductions\n"
        "                        sum floor(size / 8) doubles and skip sizes below 8\n"
        "  -D, --dist uniform|random|sparse|one-heavy   v-forms' counts: all the size;\n"
        "                        random 0..2x per pair and call; sparse 90%% 0, else 10x;\n"
        "                        one-heavy the size, but 100x from each rank to one\n"
        "                        (alltoallv: to rank + 1 + call mod (n - 1); allgatherv:\n"
        "                        from rank call mod n) (uniform)\n"
        "  -i, --iterations N    timed iterations (1000; a tenth above %d B)\n"
        "  -x, --warmup N        warm-up iterations (200; a tenth above %d B)\n"
        "  -f, --full            also min/max per-rank latency and iterations\n"
        "  -c, --validation      check the data of every iteration of every algorithm\n"
        "  -M, --mif LIST        maximum imbalance factors, 0 = no skew (0,32; 128 with "
        "--late)\n"
        "  -L, --late LIST       late mode: these fractions of ranks wait MIF x T, the "
        "rest none\n"
        "  -s, --skew spin|sleep how a rank waits (spin; sleep when ranks outnumber "
        "cores)\n"
        "  -S, --seed N          seed of the delays and of random, sparse counts (1)\n"
        "  -p, --path copy|zcopy|auto   arcoll data path (ARCOLL_PATH)\n"
        "  -F, --format table|csv|json  output (table)\n"
        "  -P, --plot FILE.png   latency vs size (and vs MIF) with gnuplot\n"
        "  -q, --quiet           no progress line on stderr\n"
        "      --arrivals auto|clock|delays   bound from CLOCK_MONOTONIC arrivals (one "
        "host) or\n"
        "                        from each rank's measured delay after the barrier (auto: "
        "clock\n"
        "                        when all ranks share a host)\n"
        "      --stat mean|median   latency and bound of a point: the mean over ranks and\n"
        "                        iterations, or the median over iterations of the mean over\n"
        "                        ranks, robust to preempted iterations on a busy machine (mean)\n"
        "  -h, --help\n",
#ifdef ARCOLL_BENCH_MPI
        "-mpi", ",mpi",
        ",\n                        mpi (MPI_Alltoall(v), MPI_Allgather(v), "
        "MPI_Reduce_scatter_block,\n                        MPI_Allreduce)",
#else
        "", "", "",
#endif
        BSTAT_LARGE_SIZE, BSTAT_LARGE_SIZE);
}

static int parse_list(char *arg, double *v, int cap, double lo, double hi, const char *what,
                      char *err, size_t errlen)
{
    int n = 0;
    char *save, *end;

    for (char *tok = strtok_r(arg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        double x = strtod(tok, &end);
        if (*end != '\0' || end == tok || !(x >= lo && x <= hi) || n == cap) {
            snprintf(err, errlen, "%s: bad value or more than %d values: %s", what, cap, tok);
            return -1;
        }
        v[n++] = x;
    }
    if (n == 0)
        snprintf(err, errlen, "%s: empty list", what);
    return n > 0 ? n : -1;
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || end == s || v < 0 || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

/* Returns 0, 1 for --help, or -1 with err set. */
int bench_parse(int argc, char **argv, opts_t *o, char *err, size_t errlen)
{
    static const struct option lopts[] = {
        {"coll", required_argument, NULL, 't'},
        {"dist", required_argument, NULL, 'D'},
        {"alg", required_argument, NULL, 'a'},
        {"baseline", required_argument, NULL, 'b'},
        {"message-size", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'x'},
        {"full", no_argument, NULL, 'f'},
        {"validation", no_argument, NULL, 'c'},
        {"mif", required_argument, NULL, 'M'},
        {"late", required_argument, NULL, 'L'},
        {"skew", required_argument, NULL, 's'},
        {"seed", required_argument, NULL, 'S'},
        {"path", required_argument, NULL, 'p'},
        {"format", required_argument, NULL, 'F'},
        {"plot", required_argument, NULL, 'P'},
        {"quiet", no_argument, NULL, 'q'},
        {"arrivals", required_argument, NULL, 'A'},
        {"stat", required_argument, NULL, 'E'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char *save, *end;
    int c;

    memset(o, 0, sizeof(*o));
    o->colls = (1 << COLL_ALLTOALL) | (1 << COLL_ALLGATHER);
    o->algs[o->nalgs++] = "pap";
    o->algs[o->nalgs++] = "direct";
#ifdef ARCOLL_BENCH_MPI
    o->algs[o->nalgs++] = "mpi";
#endif
    o->min = 1;
    o->max = 1 << 20;
    o->iters = 1000;
    o->warmup = 200;
    o->skew = -1;
    o->arrivals = -1;
    o->seed = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "t:a:b:m:i:x:fcvM:L:s:S:p:F:P:qhD:", lopts, NULL)) != -1) {
        switch (c) {
        case 't':
            o->colls = 0;
            for (char *tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int bits = strcmp(tok, "both") == 0  ? 1 << COLL_ALLTOALL | 1 << COLL_ALLGATHER
                           : strcmp(tok, "all") == 0 ? (1 << NCOLLS) - 1
                           : strcmp(tok, "reduce_scatter_block") == 0 ? 1 << COLL_REDUCE_SCATTER
                                                                      : 0;
                for (int k = 0; k < NCOLLS && bits == 0; k++)
                    bits = strcmp(tok, colls[k].name) == 0 ? 1 << k : 0;
                if (bits == 0) {
                    snprintf(err, errlen,
                             "--coll: alltoall, allgather, allgatherv, alltoallv, "
                             "reduce_scatter, allreduce, both or all, not %s",
                             tok);
                    return -1;
                }
                o->colls |= bits;
            }
            if (!o->colls) {
                snprintf(err, errlen, "--coll: empty list");
                return -1;
            }
            break;
        case 'D':
            o->dist = bstat_parse_dist(optarg);
            if (o->dist < 0) {
                snprintf(err, errlen, "--dist: uniform, random, sparse or one-heavy, not %s",
                         optarg);
                return -1;
            }
            break;
        case 'a':
            o->nalgs = 0;
            for (char *tok = strtok_r(optarg, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (o->nalgs == MAX_ALGS) {
                    snprintf(err, errlen, "--alg: at most %d algorithms", MAX_ALGS);
                    return -1;
                }
                char *slash = strchr(tok, '/');
                size_t nlen = slash ? (size_t)(slash - tok) : strlen(tok);
                if (nlen == 0 || nlen >= sizeof(o->alg_name[0]) ||
                    (slash && strcmp(slash + 1, "copy") != 0 && strcmp(slash + 1, "zcopy") != 0 &&
                     strcmp(slash + 1, "auto") != 0)) {
                    snprintf(err, errlen, "--alg %s: expected ALG or ALG/copy|zcopy|auto", tok);
                    return -1;
                }
                memcpy(o->alg_name[o->nalgs], tok, nlen);
                o->alg_name[o->nalgs][nlen] = '\0';
                o->alg_path[o->nalgs] = slash ? slash + 1 : NULL;
                o->algs[o->nalgs++] = tok;
            }
            if (o->nalgs == 0) {
                snprintf(err, errlen, "--alg: empty list");
                return -1;
            }
            break;
        case 'b': o->baseline = optarg; break;
        case 'm': {
            char *colon = strchr(optarg, ':');
            if (colon != NULL)
                *colon = '\0';
            if ((colon != NULL && bstat_parse_size(optarg, &o->min) != 0) ||
                bstat_parse_size(colon != NULL ? colon + 1 : optarg, &o->max) != 0 || o->min < 1 ||
                o->max < o->min || o->max > INT_MAX / 2) {
                snprintf(err, errlen, "--message-size: [MIN:]MAX with 1 <= MIN <= MAX < 1G");
                return -1;
            }
            break;
        }
        case 'i':
            if (parse_int(optarg, &o->iters) != 0 || o->iters < 1) {
                snprintf(err, errlen, "--iterations: a positive number");
                return -1;
            }
            break;
        case 'x':
            if (parse_int(optarg, &o->warmup) != 0) {
                snprintf(err, errlen, "--warmup: a number >= 0");
                return -1;
            }
            break;
        case 'f': o->full = 1; break;
        case 'c':
        case 'v': /* -v: validation in the first version's options, kept for scripts */
            o->validate = 1;
            break;
        case 'M':
            o->nmifs = parse_list(optarg, o->mifs, MAX_MIFS, 0, 1e6, "--mif", err, errlen);
            if (o->nmifs < 0)
                return -1;
            o->mif_set = 1;
            break;
        case 'L':
            o->nlates = parse_list(optarg, o->lates, MAX_LATES, 0, 1, "--late", err, errlen);
            if (o->nlates < 0)
                return -1;
            break;
        case 's':
            o->skew = strcmp(optarg, "spin") == 0 ? 1 : strcmp(optarg, "sleep") == 0 ? 0 : -2;
            if (o->skew == -2) {
                snprintf(err, errlen, "--skew: spin or sleep, not %s", optarg);
                return -1;
            }
            break;
        case 'S':
            errno = 0;
            o->seed = strtoull(optarg, &end, 0);
            if (errno != 0 || *end != '\0' || end == optarg) {
                snprintf(err, errlen, "--seed: a number, not %s", optarg);
                return -1;
            }
            break;
        case 'p': o->path = optarg; break;
        case 'F':
            o->format = strcmp(optarg, "table") == 0  ? FMT_TABLE
                        : strcmp(optarg, "csv") == 0  ? FMT_CSV
                        : strcmp(optarg, "json") == 0 ? FMT_JSON
                                                      : -1;
            if (o->format < 0) {
                snprintf(err, errlen, "--format: table, csv or json, not %s", optarg);
                return -1;
            }
            break;
        case 'P': o->plot = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'E':
            o->median = strcmp(optarg, "median") == 0 ? 1 : strcmp(optarg, "mean") == 0 ? 0 : -1;
            if (o->median < 0) {
                snprintf(err, errlen, "--stat: mean or median, not %s", optarg);
                return -1;
            }
            break;
        case 'A':
            o->arrivals = strcmp(optarg, "clock") == 0    ? 1
                          : strcmp(optarg, "delays") == 0 ? 0
                          : strcmp(optarg, "auto") == 0   ? -1
                                                          : -2;
            if (o->arrivals == -2) {
                snprintf(err, errlen, "--arrivals: auto, clock or delays, not %s", optarg);
                return -1;
            }
            break;
        case 'h': return 1;
        default:
            snprintf(err, errlen, "unknown option or missing value: %s", argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument: %s", argv[optind]);
        return -1;
    }
    if (!o->mif_set) {
        o->nmifs = o->nlates ? 1 : 2;
        o->mifs[0] = o->nlates ? 128 : 0; /* 002 Fig. 10/13 use MIF 128 for late ranks */
        o->mifs[1] = 32;
    }
    return 0;
}
