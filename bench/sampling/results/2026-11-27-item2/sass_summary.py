import csv, sys, collections
def load(path):
    rows=list(csv.reader(open(path)))
    hdr=rows[1]; data=rows[2:]
    ix={h:i for i,h in enumerate(hdr)}
    out=[]
    for r in data:
        if len(r)<len(hdr): continue
        def num(k):
            v=r[ix[k]].replace(',','')
            try: return float(v)
            except: return 0.0
        stalls={k[6:]:num(k) for k in hdr if k.startswith('stall_') and '(Not' not in k}
        out.append(dict(addr=r[ix['Address']],src=r[ix['Source']],samples=num('Warp Stall Sampling (All Samples)'),execd=num('Instructions Executed'),stalls=stalls))
    return out
for path in sys.argv[1:]:
    d=load(path)
    tot=sum(x['samples'] for x in d); ins=sum(x['execd'] for x in d)
    print(path, 'samples',tot,'warp instr executed',ins,'code bytes',16*len(d))
    st=collections.Counter()
    for x in d:
        for k,v in x['stalls'].items(): st[k]+=v
    print('  stalls %:', ', '.join(f'{k} {100*v/tot:.1f}' for k,v in st.most_common() if v/tot>=0.02))
    g=collections.defaultdict(lambda:[0,0])
    for x in d:
        g[int(x['execd'])][0]+=1; g[int(x['execd'])][1]+=x['samples']
    for k,(n,s) in sorted(g.items(), key=lambda kv:-kv[1][1])[:8]:
        print(f'   executed {k:7d}x: {n:5d} instructions, {s:6.0f} samples ({100*s/tot:.1f}%)')
    top=sorted(d,key=lambda x:-x['samples'])[:25]
    for x in top:
        main=max(x['stalls'].items(), key=lambda kv:kv[1])
        print(f"   {x['addr']:>8} ex {int(x['execd']):6d} s {int(x['samples']):4d} {main[0]}:{int(main[1])}  {x['src'][:70]}")
