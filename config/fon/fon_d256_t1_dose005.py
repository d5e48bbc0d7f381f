# FON-PC-T1 with the revision gate initialised at 0.005 instead of 0.02 (Fig. 10c dose axis).
base = '../fon_d256_t1.py'
out_dir = 'out-fon_d256_t1_dose005'
gate_init = 0.005
