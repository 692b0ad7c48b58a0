import json, statistics as st, sys, os, glob
OUT = sys.argv[1]
progs = ['verify', 'simd_verify', 'chain_rules', 'from_logits', 'decode_step']
def load(r, v, b):
    p = f'{OUT}/r{r}-{v}-{b}.json'
    if not os.path.exists(p): return {}
    d = json.load(open(p))
    res = {}
    for e in d['benchmarks']:
        if e.get('error_occurred'): continue
        scale = {'ns': 1e-3, 'us': 1, 'ms': 1e3, 's': 1e6}[e['time_unit']]
        res[e['name']] = dict(real=e['real_time'] * scale, cpu=e['cpu_time'] * scale,
                              allocs=e.get('allocs_per_step'), vus=e.get('verify_us'), it=e['iterations'])
    return res
def fmt_t(us):
    return f'{us/1000:.2f} ms' if us >= 1000 else f'{us:.1f} us'
rows = []
for b in progs:
    data = {(r, v): load(r, v, b) for r in (1, 2, 3) for v in ('base', 'new')}
    names = list(data[(1, 'base')].keys())
    for n in names:
        vals = {v: [data[(r, v)].get(n) for r in (1, 2, 3)] for v in ('base', 'new')}
        if any(x is None for v in vals for x in vals[v]): continue
        mb = st.median(x['real'] for x in vals['base']); mn = st.median(x['real'] for x in vals['new'])
        cb = st.median(x['cpu'] for x in vals['base']); cn = st.median(x['cpu'] for x in vals['new'])
        per = [vals['new'][i]['real'] / vals['base'][i]['real'] for i in range(3)]
        spread_b = (max(x['real'] for x in vals['base']) - min(x['real'] for x in vals['base'])) / mb
        spread_n = (max(x['real'] for x in vals['new']) - min(x['real'] for x in vals['new'])) / mn
        al = ''
        if b == 'decode_step':
            al = ' / '.join(f"{x['allocs']:.4g}" for x in vals['base']) + ' | ' + ' / '.join(f"{x['allocs']:.4g}" for x in vals['new'])
        if b == 'decode_step':
            vb = st.median(x['vus'] for x in vals['base']); vn = st.median(x['vus'] for x in vals['new'])
            al += f' ; verify_us {vb:.1f} -> {vn:.1f} ({vn/vb:.3f})'
        rows.append((b, n, mb, mn, mn / mb, cn / cb, per, spread_b, spread_n, al))
print('| program | case | base real (median) | new real (median) | new/base real | new/base CPU | per-round new/base | spread base / new | allocs/step base \\| new ; verification part |')
print('|---|---|---|---|---|---|---|---|---|')
for b, n, mb, mn, r, rc, per, sb, sn, al in rows:
    flag = ' **' if (r > 1.05 or r < 0.95) else ''
    print(f"| {b} | {n} | {fmt_t(mb)} | {fmt_t(mn)} | {r:.3f}{flag} | {rc:.3f} | {' '.join(f'{x:.2f}' for x in per)} | {100*sb:.0f} % / {100*sn:.0f} % | {al} |")
