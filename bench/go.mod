module flowzero/bench

go 1.26

replace flowzero => ../
