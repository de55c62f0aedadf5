from fakekubelet import main

main()
