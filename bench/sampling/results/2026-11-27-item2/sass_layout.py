import csv, sys
for path in sys.argv[1:]:
    rows=list(csv.reader(open(path))); hdr=rows[1]; ix={h:i for i,h in enumerate(hdr)}
    d=[(int(r[ix['Address']],16), int(float(r[ix['Instructions Executed']].replace(',','') or 0)), float(r[ix['Warp Stall Sampling (All Samples)']].replace(',','') or 0), float(r[ix['stall_no_inst']].replace(',','') or 0), r[ix['Source']]) for r in rows[2:] if len(r)>=len(hdr)]
    base=d[0][0]
    loop=[x for x in d if x[1]==10560]
    lo,hi=loop[0][0],loop[-1][0]
    print(path, 'loop span', hex(lo-base), hex(hi-base), (hi-lo)//16+1, 'instructions in span,', len(loop),'executed 10560x')
    # runs of execution count inside span
    prev=None; start=None; n=0; s=0; ni=0
    for a,e,sm,nin,src in d:
        if a<lo or a>hi: continue
        if e!=prev:
            if prev is not None: print(f'    {hex(start-base):>8} {n:4d} instr ex {prev:6d} samples {s:4.0f} no_inst {ni:3.0f}')
            prev=e; start=a; n=0; s=0; ni=0
        n+=1; s+=sm; ni+=nin
    print(f'    {hex(start-base):>8} {n:4d} instr ex {prev:6d} samples {s:4.0f} no_inst {ni:3.0f}')
