"""What a fit leaves behind: report.json (`report`), report.html (`html`), the videos and the output folder
(`files`), the plots (`plots`) and the console summary (`summary`)."""
