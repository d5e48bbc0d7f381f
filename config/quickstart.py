# The README's first run: a small GPT (the defaults' 4 x 128) on the battery's mem_l, a digit to give back
# after 10-20 random words (data/quickstart, generated offline), the loss on the answer only. Then
#   python sample.py --out_dir=out-quickstart --start="meml 7 cat dog sun hat pen cup box jar map key =" --max_new_tokens=2 --temperature=0
out_dir = 'out-quickstart'
dataset = 'quickstart'
loss_on = 'answers'      # the filler is random letters: a loss on it teaches nothing and drowns the answer
learning_rate = 6e-3     # measured on this run: 3e-3 had learned 60% of the answers at 2000 iterations, 6e-3 all
min_lr = 3e-4
max_iters = 1000
